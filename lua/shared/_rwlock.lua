-- #include "shared/_lock_flags.lua"
-- A read-write lock (fastlock.locks.readwrite; docs/locks.md, "Read-write locks"). KEYS of
-- every rwlock script, all under the lock name's hash tag (one cluster slot):
local K_WRITER = KEYS[1]  -- string "<token>:<job>", PX = the writer's ttl
local K_READERS = KEYS[2] -- zset: reader job -> its expiry (server ms; inf: none)
local K_TOKENS = KEYS[3]  -- hash: reader job -> "<token>:<expiry ms, 0: none>"
local K_SEQ = KEYS[4]     -- string: the fencing counter of both sides (no expiry)
local K_WRITERS = KEYS[5] -- zset: waiting writers' members -> ms until which each counts as waiting
local K_WAITERS = KEYS[6] -- zset: every waiter's member -> ms until which it counts as alive
local K_WAKE = KEYS[7]    -- stream: one entry per wake-up of blocked waiters; "<K_WAKE>@<db>": the channel
-- A waiter's member is "<db>:<wait>" when it sleeps on a listener (woken by PUBLISH, or by
-- SPUBLISH when <wait> starts with "s": a cluster listener's shard channel), else "b:<wait>"
-- (blocked in XREAD on K_WAKE). The flags (shared/_lock_flags.lua): WAITING, on
-- conflict, registers the waiter (a writer also as waiting: new readers wait behind it);
-- WAITED, the waiter leaves on success; DEQUEUED, it leaves on conflict (its last attempt).

-- #const
local ALIVE_MS = 3000     -- a waiter counts as alive (and a writer as waiting) this long after its attempt
local WAKE_TTL_MS = 10000 -- life of the wake stream after its last entry
local MAX_SEEN = 256      -- waiters a wake-up looks at to know which kinds there are
local PRUNE = 16          -- lowest-scored readers looked at (expired ones dropped) per read acquire

local function now_ms()
  local t = redis.call("TIME")
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

local function has(flags, bit)
  return flags % (2 * bit) >= bit
end

-- The writer's token and job, from its value (nil when there is none).
local function parse_writer(value)
  if value then
    return string.match(value, "^(%d+):(.*)$")
  end
end

-- A reader's token and expiry (ms, "0": none) from its value in K_TOKENS, if still live at `now`.
local function live_reader(value, now)
  if value then
    local token, expiry = string.match(value, "^(%d+):(%d+)$")
    if expiry == "0" or expiry + 0 > now then
      return token
    end
  end
end

-- Ms until the last waiting writer stops counting as waiting, or nil when none waits.
local function writer_waits(now)
  local top = redis.call("ZRANGE", K_WRITERS, -1, -1, "WITHSCORES")
  if top[2] and top[2] + 0 > now then
    return top[2] - now
  end
end

-- Wake every live waiter: each tries again. One PUBLISH "*" reaches the listening ones, one
-- entry added to the wake stream every blocked one (each blocks in XREAD for an entry newer
-- than the last it saw: nothing is consumed, so no waiter takes another's wake-up).
local function wake_all(now)
  local members = redis.call("ZRANGE", K_WAITERS, string.format("(%d", now), "+inf", "BYSCORE", "LIMIT", 0,
    MAX_SEEN)
  local db, shard, blocked = nil, false, #members == MAX_SEEN
  for i = 1, #members do
    local found, mark = string.match(members[i], "^(%d+):(s?)")
    if found then
      db, shard = found, shard or mark == "s"
    else
      blocked = true
    end
  end
  if db then
    redis.call(shard and "SPUBLISH" or "PUBLISH", K_WAKE .. "@" .. db, "*")
  end
  if blocked then
    redis.call("XADD", K_WAKE, "MAXLEN", "1", "*", "w", "1")
    redis.call("PEXPIRE", K_WAKE, WAKE_TTL_MS)
  end
end

-- Register `member` as waiting (a `writer` also as a waiting writer) until now + ALIVE_MS. A
-- blocked waiter is told the id of the wake stream's last entry (0-0: none), to block on.
local function register(member, now, writer)
  local alive = now + ALIVE_MS
  redis.call("ZADD", K_WAITERS, alive, member)
  redis.call("PEXPIRE", K_WAITERS, ALIVE_MS)
  if writer then
    redis.call("ZADD", K_WRITERS, alive, member)
    redis.call("PEXPIRE", K_WRITERS, ALIVE_MS)
  end
  if string.sub(member, 1, 2) == "b:" then
    local last = redis.call("XREVRANGE", K_WAKE, "+", "-", "COUNT", 1)[1]
    return last and last[1] or "0-0"
  end
end

-- `member` stops waiting. A waiting writer that leaves with no writer holding or waiting wakes
-- the waiters (readers it held back may go).
local function leave(member, now)
  redis.call("ZREM", K_WAITERS, member)
  if redis.call("ZREM", K_WRITERS, member) == 1 and redis.call("EXISTS", K_WRITER) == 0
      and not writer_waits(now) and redis.call("EXISTS", K_WAITERS) == 1 then
    wake_all(now)
  end
end
