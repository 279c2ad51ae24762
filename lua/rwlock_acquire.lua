-- Take one side of a read-write lock for a job (KEYS: shared/_rwlock.lua).
-- ARGV: side ("r" or "w"), job, ttl ms ("0": no expiry), flags (WAITING, WAITED, DEQUEUED),
--       then, with a flag, the waiter's member
-- Returns the fencing token (a job holding the side gets its own back), or on conflict
-- {ms until the conflict may end by an expiry (-1: not by one), what holds it: "writer",
-- "readers" or "waiting writer", and for a blocked waiter registered the wake stream's last
-- entry id}. A writer is refused while any reader is live, a new reader
-- while a writer holds or waits (writer preference); the writer may take the read side too.
-- A job asking for the write side while it holds the read side gets an error (no upgrade).
-- #include "shared/_rwlock.lua"

local side, job, ttl, flags, member = ARGV[1], ARGV[2], ARGV[3], ARGV[4] + 0, ARGV[5]
local wtoken, writer = parse_writer(redis.call("GET", K_WRITER))
local conflict, now = nil, nil
if writer == job then
  if side == "w" then
    return wtoken + 0
  end
elseif writer then
  conflict = { redis.call("PTTL", K_WRITER), "writer" }
end

if side == "w" then
  if not conflict then
    local top = redis.call("ZRANGE", K_READERS, -1, -1, "WITHSCORES")
    if top[2] then
      now = now_ms()
      if top[2] == "inf" or top[2] + 0 > now then
        if live_reader(redis.call("HGET", K_TOKENS, job), now) then
          return redis.error_reply("ERR rwlock upgrade refused: job " .. job
            .. " holds the read side; release it before taking the write side")
        end
        conflict = { top[2] == "inf" and -1 or top[2] - now, "readers" }
      end
    end
  end
  if not conflict then
    local token = redis.call("INCR", K_SEQ)
    local value = string.format("%d:", token) .. job
    if ttl ~= "0" then
      redis.call("SET", K_WRITER, value, "PX", ttl)
    else
      redis.call("SET", K_WRITER, value)
    end
    if has(flags, WAITED) then
      leave(member, now or now_ms())
    end
    return token
  end
elseif not conflict then
  now = now_ms()
  local held = live_reader(redis.call("HGET", K_TOKENS, job), now)
  if held then
    return held + 0
  end
  if not writer then
    local ms = writer_waits(now)
    if ms then
      conflict = { ms, "waiting writer" }
    end
  end
  if not conflict then
    -- drop expired readers among the lowest-scored (bounded work), then enter this one
    local low, stale = redis.call("ZRANGE", K_READERS, 0, PRUNE - 1, "WITHSCORES"), {}
    for i = 2, #low, 2 do
      if low[i] ~= "inf" and low[i] + 0 <= now then
        stale[#stale + 1] = low[i - 1]
      end
    end
    -- no reader left: the keys are new, without an expiry
    local fresh = #low == 0
    if #stale > 0 then
      redis.call("ZREM", K_READERS, unpack(stale))
      redis.call("HDEL", K_TOKENS, unpack(stale))
      fresh = #stale * 2 == #low and (#low < PRUNE * 2 or redis.call("EXISTS", K_READERS) == 0)
    end
    local token = redis.call("INCR", K_SEQ)
    if ttl ~= "0" then
      local expiry = now + ttl
      redis.call("ZADD", K_READERS, expiry, job)
      redis.call("HSET", K_TOKENS, job, string.format("%d:%d", token, expiry))
      -- the keys live as long as their longest-lived reader
      if fresh then
        redis.call("PEXPIRE", K_READERS, ttl)
        redis.call("PEXPIRE", K_TOKENS, ttl)
      else
        redis.call("PEXPIRE", K_READERS, ttl, "GT")
        redis.call("PEXPIRE", K_TOKENS, ttl, "GT")
      end
    else
      redis.call("ZADD", K_READERS, "+inf", job)
      redis.call("HSET", K_TOKENS, job, string.format("%d:0", token))
      if not fresh then
        redis.call("PERSIST", K_READERS)
        redis.call("PERSIST", K_TOKENS)
      end
    end
    if has(flags, WAITED) then
      leave(member, now)
    end
    return token
  end
end

now = now or now_ms()
if has(flags, WAITING) then
  conflict[3] = register(member, now, side == "w")
elseif has(flags, DEQUEUED) then
  leave(member, now)
end
return conflict
