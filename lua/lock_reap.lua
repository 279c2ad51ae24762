-- Reaper pass over a batch of one bucket's index entries.
-- KEYS: index, counter, changelog, then per entry its `limit` slot keys (no wake list;
--       shared/_lock_slots.lua)
-- ARGV: max_history, then per entry: scope, limit
-- An entry none of whose slots exists any more (expired by ttl, or deleted behind the
-- index's back) is dropped from the index. Returns the number dropped, then for every live
-- entry: scope, number of held slots, and those slots' values.
-- #include "shared/_lock_slots.lua"

local max_history = tonumber(ARGV[1])
local out, dropped, first = { 0 }, 0, FIRST_SCOPE
for a = 2, #ARGV, 2 do
  local scope, limit = ARGV[a], tonumber(ARGV[a + 1])
  local values = read_slots(first, limit)
  local held = {}
  for i = 1, limit do
    if values[i] then
      held[#held + 1] = values[i]
    end
  end
  if #held == 0 then
    redis.call("ZREM", K_INDEX, index_member(scope, limit))
    changelog(max_history, "reaped", scope, "", 0)
    dropped = dropped + 1
  else
    out[#out + 1] = scope
    out[#out + 1] = #held
    for i = 1, #held do
      out[#out + 1] = held[i]
    end
  end
  first = first + limit
end
out[1] = dropped
return out
