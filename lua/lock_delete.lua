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
local deleted, blocked, queued = 0, false, false
for i = 1, limit do
  if values[i] then
    local token, flag, holder = parse_slot(values[i])
    deleted = deleted + 1
    blocked = blocked or has_bit(flag + 0, BLOCKED)
    queued = queued or has_bit(flag + 0, QUEUED_BY)
    changelog(max_history, "deleted", scope, holder, token)
  end
end
local handed = 0
if deleted > 0 then
  redis.call("DEL", unpack(KEYS, FIRST_SCOPE + 1))
  local bits = (blocked and BLOCKED or 0) + (queued and QUEUED_BY or 0)
  while queued and handed < deleted and hand_over(FIRST_SCOPE, KEYS[FIRST_SCOPE + 1 + handed], {}, limit,
      scope, max_history, bits) do
    handed = handed + 1
  end
  if blocked and handed < deleted then
    wake_waiters(FIRST_SCOPE, deleted - handed, limit)
  end
end
if handed == 0 then
  redis.call("ZREM", K_INDEX, index_member(scope, limit))
end
return deleted
