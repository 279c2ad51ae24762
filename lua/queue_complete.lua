-- Complete leased jobs, then (ARGV[2] > 0) claim the next batch in the same call.
-- KEYS: the queue's worker keys (10; a rated queue's rate key 11th). ARGV: completed history
-- size, claim count, lease ms, (rated: the rate's GCRA interval and tolerance ms,) then the
-- lease members. A member no longer in the lease index was completed
-- before (a retried call: found in the history) or lost to recovery or another worker.
-- Returns {{indexes of lost members}, claim reply or {}}; nothing is claimed when any
-- lease was lost.
-- #include "shared/_queue_claim.lua"
local keep = ARGV[1] + 0
local LEASE = "^(%d+)|%d+|[^|]*|([^|]*)|(.*)$" -- a lease member's token, unique and id

-- Remember completed members in the history (token, member, ...), trimmed to `keep`.
local function remember(...)
  redis.call("ZADD", K_DONE, ...)
  redis.call("ZREMRANGEBYRANK", K_DONE, "0", -keep - 1)
end

local first = KEYS[11] and 6 or 4 -- the first member's index (a rated queue sends 11 keys)
local lost
if #ARGV == first then -- one member (the unbatched path): ZREM tells whether it was held; no tables
  local member = ARGV[first]
  if redis.call("ZREM", K_ACTIVE, member) == 1 then
    local token, unique, id = string.match(member, LEASE)
    redis.call("HDEL", K_DATA, id)
    if unique ~= "" then -- 'd' + digest (until done): the only lock a lease carries
      release_unique({{string.sub(unique, 2), id}})
    end
    if keep > 0 then
      remember(token, member)
    end
    lost = {}
  elseif keep > 0 and redis.call("ZSCORE", K_DONE, member) then
    lost = {} -- completed before
  else
    lost = {1}
  end
else
  -- (included here, so only a batch creates its closures)
  -- #include "shared/_queue_leases.lua"
  local members = {unpack(ARGV, first)}
  local held, missing = partition(K_ACTIVE, members)
  if #held > 0 then
    local done = #missing == 0 and members or pick(members, held)
    redis.call("ZREM", K_ACTIVE, unpack(done))
    local ids, locks, history = {}, {}, {}
    for j, member in ipairs(done) do
      local token, unique, id = string.match(member, LEASE)
      ids[j] = id
      if unique ~= "" then
        locks[#locks + 1] = {string.sub(unique, 2), id}
      end
      history[2 * j - 1] = token
      history[2 * j] = member
    end
    redis.call("HDEL", K_DATA, unpack(ids))
    release_unique(locks)
    if keep > 0 then
      remember(unpack(history))
    end
  end
  lost = missing
  if #missing > 0 and keep > 0 then
    local _, unseen = partition(K_DONE, pick(members, missing))
    lost = pick(missing, unseen)
  end
end
if #lost > 0 or ARGV[2] == "0" then
  return {lost, {}}
end
if first == 6 then
  -- #include "shared/_queue_rate.lua"
  return {lost, rated_claim(ARGV[2], ARGV[3], ARGV[4], ARGV[5])}
end
return {lost, claim(ARGV[2], ARGV[3])}
