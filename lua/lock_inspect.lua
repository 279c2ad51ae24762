-- Holders of one lock scope, read atomically.
-- KEYS: index, counter, changelog, then the scope: wake, slot 1..limit (shared/_lock_slots.lua)
-- Returns {value, pttl, value, pttl, ...} for the held slots (pttl -1: no expiry).
-- #include "shared/_lock_slots.lua"

local limit = #KEYS - FIRST_SCOPE
local values = read_slots(FIRST_SCOPE + 1, limit)
local out = {}
for i = 1, limit do
  if values[i] then
    out[#out + 1] = values[i]
    out[#out + 1] = redis.call("PTTL", KEYS[FIRST_SCOPE + i])
  end
end
return out
