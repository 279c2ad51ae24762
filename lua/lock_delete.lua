-- Delete every holder of one lock scope, whoever holds it (admin), wake its waiters and drop
-- it from the bucket index (see shared/_lock_slots.lua for KEYS).
-- KEYS: index, counter, changelog, wake, slot 1..limit
-- ARGV: scope, max_history
-- Returns the number of holders deleted.
-- #include "shared/_lock_slots.lua"

local limit, scope, max_history = #KEYS - 4, ARGV[1], tonumber(ARGV[2])
local values = read_slots(5, limit)
local deleted, waited = 0, false
for i = 1, limit do
  if values[i] then
    local token, flag, holder = parse_slot(values[i])
    deleted = deleted + 1
    waited = waited or flag == "1"
    changelog(max_history, "deleted", scope, holder, token)
  end
end
if deleted > 0 then
  redis.call("DEL", unpack(KEYS, 5))
  if waited then
    wake_waiters(4, deleted, limit)
  end
end
redis.call("ZREM", KEYS[1], scope .. "#" .. limit)
return deleted
