-- Holders of one lock scope, read atomically (see shared/_lock_slots.lua for KEYS).
-- KEYS: index, counter, changelog, wake, slot 1..limit
-- Returns {value, pttl, value, pttl, ...} for the held slots (pttl -1: no expiry).
-- #include "shared/_lock_slots.lua"

local limit = #KEYS - 4
local values = read_slots(5, limit)
local out = {}
for i = 1, limit do
  if values[i] then
    out[#out + 1] = values[i]
    out[#out + 1] = redis.call("PTTL", KEYS[4 + i])
  end
end
return out
