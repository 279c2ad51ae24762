-- Delete every holder of one lock scope, whoever holds it (admin), hand the freed slots over to
-- queued listening waiters (else wake its waiters) and drop it from the bucket index unless
-- a slot was handed over.
-- KEYS: index, counter, changelog, then the scope: wake, slot 1..limit (shared/_lock_slots.lua)
-- ARGV: scope, max_history
-- Returns the number of holders deleted.
-- #include "shared/_lock_wake.lua"

local scope, max_history = ARGV[1], tonumber(ARGV[2])
local limit = #KEYS - FIRST_SCOPE
local values = read_slots(FIRST_SCOPE + 1, limit)
local deleted, waited = 0, false
for i = 1, limit do
  if values[i] then
    local token, flag, holder = parse_slot(values[i])
    deleted = deleted + 1
    waited = waited or flag == "1"
    changelog(max_history, "deleted", scope, holder, token)
  end
end
local handed = 0
if deleted > 0 then
  redis.call("DEL", unpack(KEYS, FIRST_SCOPE + 1))
  if waited then
    while handed < deleted and hand_over(FIRST_SCOPE, KEYS[FIRST_SCOPE + 1 + handed], {}, limit, scope,
        max_history) do
      handed = handed + 1
    end
    if handed < deleted then
      wake_waiters(FIRST_SCOPE, deleted - handed, limit)
    end
  end
end
if handed == 0 then
  redis.call("ZREM", K_INDEX, index_member(scope, limit))
end
return deleted
