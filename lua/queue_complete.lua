-- Complete leased jobs, then (ARGV[2] > 0) claim the next batch in the same call.
-- KEYS: the queue's worker keys (10). ARGV: completed history size, claim count, lease ms, promote
-- limit, then the lease members. A member no longer in the lease index was completed
-- before (a retried call: found in the history) or lost to recovery or another worker.
-- Returns {{indexes of lost members}, claim reply or {}}; nothing is claimed when any
-- lease was lost.
-- #include "shared/_queue_claim.lua"
-- #include "shared/_queue_leases.lua"
local keep, count = tonumber(ARGV[1]), tonumber(ARGV[2])
local members, held, missing
if #ARGV == 5 then -- one member (the unbatched path): no ZMSCORE, no copies
  members = {ARGV[5]}
  if redis.call('ZREM', K_ACTIVE, ARGV[5]) == 1 then
    held, missing = {1}, {}
  else
    held, missing = {}, {1}
  end
else
  members = {unpack(ARGV, 5)}
  held, missing = partition(K_ACTIVE, members)
  if #held > 0 then
    redis.call('ZREM', K_ACTIVE, unpack(pick(members, held)))
  end
end
local lost = missing
if #missing > 0 and keep > 0 then
  local _, unseen = partition(K_DONE, pick(members, missing))
  lost = pick(missing, unseen)
end
if #held > 0 then
  local ids, locks, history = {}, nil, {}
  for j, i in ipairs(held) do
    local token, unique, id = split_lease(members[i])
    ids[j] = id
    local lock = done_lock(unique, id)
    if lock then
      locks = locks or {}
      locks[#locks + 1] = lock
    end
    history[2 * j - 1] = token
    history[2 * j] = members[i]
  end
  redis.call('HDEL', K_DATA, unpack(ids))
  release_unique(locks)
  if keep > 0 then
    redis.call('ZADD', K_DONE, unpack(history))
    redis.call('ZREMRANGEBYRANK', K_DONE, '0', int(-keep - 1))
  end
end
if #lost > 0 or count == 0 then
  return {lost, {}}
end
return {{}, claim(ARGV[2], ARGV[3], ARGV[4])}
