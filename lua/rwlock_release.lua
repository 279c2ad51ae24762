-- Release one side of a read-write lock held by a job (KEYS: shared/_rwlock.lua).
-- ARGV: side ("r" or "w"), job, then, for a waiter that leaves (cancelled), its member
-- Returns the freed fencing token, or 0 when the job held nothing (a reader whose ttl ran
-- out holds nothing). A release that frees the lock for a waiter wakes the waiters: a
-- writer's always, a reader's when no live reader is left.
-- #include "shared/_rwlock.lua"

local side, job, member = ARGV[1], ARGV[2], ARGV[3]
local freed, now = 0, nil
if side == "w" then
  local token, writer = parse_writer(redis.call("GET", K_WRITER))
  if writer == job then
    redis.call("DEL", K_WRITER)
    freed = token + 0
  end
else
  local value = redis.call("HGET", K_TOKENS, job)
  if value then
    redis.call("ZREM", K_READERS, job)
    redis.call("HDEL", K_TOKENS, job)
    now = now_ms()
    freed = (live_reader(value, now) or 0) + 0
  end
end
if member then
  leave(member, now or now_ms())
end
if freed > 0 and redis.call("EXISTS", K_WAITERS) == 1 then
  now = now or now_ms()
  if side == "w" or redis.call("ZCOUNT", K_READERS, string.format("(%d", now), "+inf") == 0 then
    wake_all(now)
  end
end
return freed
