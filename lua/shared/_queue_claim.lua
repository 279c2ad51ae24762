-- #include "shared/_queue_keys.lua"
-- Claim up to `count` ready jobs under a lease of `lease_ms`: decimal strings (the caller's
-- ARGV, passed to redis.call as they are). First promotes up to `promote` due delayed jobs;
-- a full batch re-arms the wake marker.
-- Returns {now, next_due, member, payload, ...}: next_due is the earliest delayed due time
-- when nothing was ready (-1 when none), members carry fencing token and attempt.
local function claim(count_arg, lease_ms, promote)
  local count = tonumber(count_arg)
  local now = now_ms()
  local due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', int(now), 'LIMIT', '0', promote)
  if #due > 0 then
    redis.call('ZREM', K_DELAYED, unpack(due))
    push_ready(due, false)
  end
  local words = redis.call('RPOP', K_READY, count_arg) or {}
  if #words < count then
    local popped = redis.call('ZPOPMIN', K_PRIO, int(count - #words))
    for i = 1, #popped, 2 do
      words[#words + 1] = popped[i]
    end
  end
  if #words == count then
    wake() -- more may be ready: let another waiting worker look
  elseif #words == 0 then
    local first = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
    return {now, first[2] or -1}
  end
  local ids = {} -- the id of each word (no table per word: the rest is read again below)
  for i, word in ipairs(words) do
    ids[i] = string.match(word, '^%d+|[^|]*|[^|]*|(.*)$')
  end
  local payloads = redis.call('HMGET', K_DATA, unpack(ids))
  local kept = {} -- words whose job still has data (anything else was purged: dropped)
  for i = 1, #words do
    if payloads[i] then
      kept[#kept + 1] = i
    end
  end
  local reply = {now, -1}
  if #kept == 0 then
    return reply
  end
  local first_token
  if #kept == 1 then
    first_token = redis.call('INCR', K_FENCE) - 1
  else
    first_token = redis.call('INCRBY', K_FENCE, int(#kept)) - #kept
  end
  local deadline = int(now + tonumber(lease_ms))
  -- The leases go to ZADD newest first (see push_delayed).
  local leases, started, n = {}, nil, #kept
  for j, i in ipairs(kept) do
    local id = ids[i]
    local attempts, priority, unique = string.match(words[i], '^(%d+)|([^|]*)|([^|]*)|')
    if string.sub(unique, 1, 1) == 's' then
      started = started or {}
      started[#started + 1] = {string.sub(unique, 2), id}
      unique = ''
    end
    local member = string.format('%d|%d|', first_token + j, attempts + 1) .. priority .. '|' .. unique .. '|' .. id
    leases[2 * (n - j) + 1] = deadline
    leases[2 * (n - j) + 2] = member
    reply[2 * j + 1] = member
    reply[2 * j + 2] = payloads[i]
  end
  release_unique(started)
  redis.call('ZADD', K_ACTIVE, unpack(leases, 1, 2 * n))
  return reply
end
