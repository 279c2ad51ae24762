-- #include "shared/_queue_push.lua"
-- #include "shared/_queue_unique.lua"
-- Claim up to `count` jobs (the caller's ARGV string) under a lease of `lease_ms`; a full
-- batch re-arms the wake marker. Returns {now, next_due, member, payload, ...}: next_due is
-- the earliest delayed due time when nothing was ready (-1 when none, -2 when the queue is
-- paused), members carry fencing token and attempt.
-- Due delayed jobs are promoted to ready (at most PROMOTE per call) when ready runs short
-- of `count`, before the prioritised lane is read, and otherwise by each claim that mints a
-- multiple of PROMOTE_EVERY as a token: a due job is promoted by the first claim that finds
-- too few ready jobs, or at the latest once PROMOTE_EVERY more jobs have been claimed.
-- #const
local PROMOTE, PROMOTE_EVERY = 100, 16

-- Move up to PROMOTE due delayed jobs to ready. Returns true if some were due, else false
-- and the next due time (-1: none delayed).
local function promote(now)
  local first = redis.call("ZRANGE", K_DELAYED, 0, 0, "WITHSCORES")
  if not first[2] or first[2] + 0 > now then
    return false, first[2] or -1
  end
  local due = redis.call("ZRANGEBYSCORE", K_DELAYED, "-inf", now, "LIMIT", 0, PROMOTE)
  redis.call("ZREM", K_DELAYED, unpack(due))
  push_ready(due, false)
  return true
end

-- A claimed word's attempts, its lease member's tail ("|<priority>|<unique>|<id>", without
-- an 's' lock), its id and its 's' (until started) lock, released by the claim, as a
-- release_unique pair (nil: none).
local function lease_parts(word)
  local attempts, tail, unique, id = string.match(word, "^(%d+)(|[^|]*|([^|]*)|(.*))$")
  if unique == "" or string.byte(unique) ~= 115 then -- not 's'
    return attempts, tail, id
  end
  return attempts, string.match(tail, "^|[^|]*|") .. "|" .. id, id, {string.sub(unique, 2), id}
end

local function claim(count_arg, lease_ms, now)
  local count = count_arg + 0
  now = now or now_ms()
  -- Up to `count` words from ready's tail; when that runs short, due delayed jobs promoted,
  -- ready again, then the prioritised lane.
  local words, looked, next_due
  if count == 1 then -- the unbatched path: no reply table
    words = {redis.call("RPOP", K_READY) or nil}
  else
    words = redis.call("RPOP", K_READY, count_arg) or {}
  end
  if words[1] == PAUSED then -- put back as they were (the marker last); next_due -2: paused
    local back, n = {}, #words
    for i = 1, n do
      back[i] = words[n + 1 - i]
    end
    redis.call("RPUSH", K_READY, unpack(back))
    return {now, -2}
  end
  if #words < count then
    local promoted
    looked, promoted, next_due = true, promote(now)
    if promoted then
      for _, word in ipairs(redis.call("RPOP", K_READY, count - #words) or {}) do
        words[#words + 1] = word
      end
    end
    if #words < count then
      local popped = redis.call("ZPOPMIN", K_PRIO, count - #words)
      for i = 1, #popped, 2 do
        words[#words + 1] = popped[i]
      end
    end
  end
  local n = #words
  if n == 0 then
    return {now, next_due or -1}
  elseif n == count then
    wake() -- more may be ready: let another waiting worker look
  end
  local deadline = int(now + lease_ms)
  if n == 1 then
    local attempts, tail, id, started = lease_parts(words[1])
    local payload = redis.call("HGET", K_DATA, id)
    if not payload then -- purged: dropped
      return {now, -1}
    end
    local token = redis.call("INCR", K_FENCE)
    local member = string.format("%d|%d", token, attempts + 1) .. tail
    if started then
      release_unique({started})
    end
    redis.call("ZADD", K_ACTIVE, deadline, member)
    if not looked and token % PROMOTE_EVERY == 0 then
      promote(now)
    end
    return {now, -1, member, payload}
  end
  local attempts, tails, ids, started = {}, {}, {}, {}
  for i = 1, n do
    attempts[i], tails[i], ids[i], started[#started + 1] = lease_parts(words[i])
  end
  local payloads = redis.call("HMGET", K_DATA, unpack(ids))
  local kept = {} -- words whose job still has data (anything else was purged: dropped)
  for i = 1, n do
    if payloads[i] then
      kept[#kept + 1] = i
    end
  end
  local reply, k = {now, -1}, #kept
  if k == 0 then
    return reply
  end
  local last = redis.call("INCRBY", K_FENCE, k)
  -- The leases go to ZADD newest first (see push_delayed).
  local leases = {}
  for j, i in ipairs(kept) do
    local member = string.format("%d|%d", last - k + j, attempts[i] + 1) .. tails[i]
    leases[2 * (k - j) + 1] = deadline
    leases[2 * (k - j) + 2] = member
    reply[2 * j + 1] = member
    reply[2 * j + 2] = payloads[i]
  end
  release_unique(started)
  redis.call("ZADD", K_ACTIVE, unpack(leases, 1, 2 * k))
  if not looked and last % PROMOTE_EVERY < k then
    promote(now)
  end
  return reply
end
