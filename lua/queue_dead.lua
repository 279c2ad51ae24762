-- Dead letters: ARGV[1] = 'list', 'requeue' or 'purge', ARGV[2] = limit, ARGV[3] = age ms
-- (only dead-lettered at least that long ago; -1 = any), then optional ids (default: the
-- oldest). KEYS: the queue's keys.
-- list returns {id, died ms, payload, "<attempts>|<priority>|<error>", ...}; requeue
-- (attempts reset, unique lock not retaken) and purge (data deleted) return the count.
-- #include "shared/_queue_push.lua"
local op, limit, age = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local ids, died = {}, {}
if #ARGV > 3 then
  local given = {}
  for i = 4, math.min(#ARGV, limit + 3) do
    given[#given + 1] = ARGV[i]
  end
  local scores = redis.call("ZMSCORE", K_DEAD, unpack(given))
  for i, id in ipairs(given) do
    if scores[i] then
      ids[#ids + 1] = id
      died[#ids] = scores[i]
    end
  end
else
  local cutoff = age < 0 and "+inf" or int(now_ms() - age)
  local found = redis.call("ZRANGEBYSCORE", K_DEAD, "-inf", cutoff, "WITHSCORES", "LIMIT", 0, limit)
  for i = 1, #found, 2 do
    ids[#ids + 1] = found[i]
    died[#ids] = found[i + 1]
  end
end
if #ids == 0 then
  return op == "list" and {} or 0
end
local errors = redis.call("HMGET", K_ERR, unpack(ids))
if op == "list" then
  local payloads = redis.call("HMGET", K_DATA, unpack(ids))
  local reply = {}
  for i, id in ipairs(ids) do
    local n = #reply
    reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = id, died[i], payloads[i], errors[i]
  end
  return reply
end
redis.call("ZREM", K_DEAD, unpack(ids))
redis.call("HDEL", K_ERR, unpack(ids))
if op == "purge" then
  redis.call("HDEL", K_DATA, unpack(ids))
else
  local words = {}
  for i, id in ipairs(ids) do
    words[i] = "0|" .. string.match(errors[i] or "0||", "^%d+|([^|]*)|") .. "||" .. id
  end
  push_ready(words, true)
end
return #ids
