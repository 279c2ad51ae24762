-- Periodic jobs (fastlock.queues.schedule, docs/queues.md "Periodic jobs"). KEYS: the queue's
-- first 3 keys, then its schedules' spec hash, payload hash, due sorted set and wake marker.
-- ARGV[1] is the action:
--   "set", name, spec, payload, due ms: store the schedule (an unchanged spec and payload
--     keep their due time); returns 1 when it was created or changed, else 0.
--   "del", name: returns 1 when it was removed.
--   "list", count: up to count {name, spec, due}, earliest first.
--   "next": returns {now ms, name, due ms, spec} of the earliest schedule ({now} when none).
--   "tick", name, spec, due, next due, id...: when the schedule's due time is still `due`,
--     its spec `spec` and due <= now, enqueue a job of its payload under each id (the ticks'
--     due times: the unique key) and move its due time to `next due`, at once; returns
--     {jobs enqueued (-1: refused, another scheduler took the tick), then "next"'s reply}.
-- #include "shared/_queue_push.lua"
local K_SPEC, K_PAYLOAD, K_DUE, K_SWAKE = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local action = ARGV[1]

local function earliest(now)
  now = int(now)
  local first = redis.call("ZRANGE", K_DUE, 0, 0, "WITHSCORES")
  if #first == 0 then
    return {now}
  end
  return {now, first[1], int(first[2]), redis.call("HGET", K_SPEC, first[1])}
end

if action == "next" then
  return earliest(now_ms())
elseif action == "tick" then
  local name, due = ARGV[2], ARGV[4]
  local done, now = -1, now_ms()
  local score = redis.call("ZSCORE", K_DUE, name)
  if score and int(score) == due and redis.call("HGET", K_SPEC, name) == ARGV[3]
      and tonumber(due) <= now then
    done = 0
    local payload = redis.call("HGET", K_PAYLOAD, name)
    for i = 6, #ARGV do
      if redis.call("HSETNX", K_DATA, ARGV[i], payload) == 1 then
        push_plain({"0|||" .. ARGV[i]}, true)
        done = done + 1
      end
    end
    redis.call("ZADD", K_DUE, ARGV[5], name)
  end
  local reply = earliest(now)
  table.insert(reply, 1, done)
  return reply
elseif action == "set" then
  local name = ARGV[2]
  if redis.call("HGET", K_SPEC, name) == ARGV[3] and redis.call("HGET", K_PAYLOAD, name) == ARGV[4] then
    return 0
  end
  redis.call("HSET", K_SPEC, name, ARGV[3])
  redis.call("HSET", K_PAYLOAD, name, ARGV[4])
  redis.call("ZADD", K_DUE, ARGV[5], name)
  redis.call("ZADD", K_SWAKE, "0", "w")
  return 1
elseif action == "del" then
  redis.call("HDEL", K_PAYLOAD, ARGV[2])
  redis.call("ZREM", K_DUE, ARGV[2])
  return redis.call("HDEL", K_SPEC, ARGV[2])
end
local listed = redis.call("ZRANGE", K_DUE, 0, tonumber(ARGV[2]) - 1, "WITHSCORES")
local rows = {}
for i = 1, #listed, 2 do
  rows[#rows + 1] = {listed[i], redis.call("HGET", K_SPEC, listed[i]), int(listed[i + 1])}
end
return rows
