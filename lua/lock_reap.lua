-- Reaper pass over a batch of one bucket's index entries (see shared/_lock_slots.lua).
-- KEYS: index, counter, changelog, then per entry its `limit` slot keys
-- ARGV: max_history, then per entry: scope, limit
-- An entry none of whose slots exists any more (expired by ttl, or deleted behind the
-- index's back) is dropped from the index. Returns the number dropped, then for every live
-- entry: scope, number of held slots, and those slots' values.
-- #include "shared/_lock_slots.lua"

local max_history = tonumber(ARGV[1])
local out, dropped, key = { 0 }, 0, 4
for a = 2, #ARGV, 2 do
  local scope, limit = ARGV[a], tonumber(ARGV[a + 1])
  local values = read_slots(key, limit)
  local held = {}
  for i = 1, limit do
    if values[i] then
      held[#held + 1] = values[i]
    end
  end
  if #held == 0 then
    redis.call("ZREM", KEYS[1], scope .. "#" .. limit)
    changelog(max_history, "reaped", scope, "", 0)
    dropped = dropped + 1
  else
    out[#out + 1] = scope
    out[#out + 1] = #held
    for i = 1, #held do
      out[#out + 1] = held[i]
    end
  end
  key = key + limit
end
out[1] = dropped
return out
