-- #include "shared/_lock_slots.lua"
-- #const
local WAKE_TTL_MS = 10000

-- Wake `n` blocked acquirers of the scope at KEYS[at], plus one spare: a waiter that pops a
-- wake-up and dies before its acquire (killed, interrupted) would otherwise leave the others
-- asleep while a slot is free. The spare's waiter retries at once and, finding the slot
-- taken, flags its holder and sleeps again. Unclaimed wake-ups are capped at `limit` + 1
-- (one per slot that can be free, plus the spare).
local function wake_waiters(at, n, limit)
  local wake = KEYS[at]
  local tokens = {}
  for i = 1, n + 1 do
    tokens[i] = "1"
  end
  redis.call("LPUSH", wake, unpack(tokens))
  redis.call("LTRIM", wake, 0, limit)
  redis.call("PEXPIRE", wake, WAKE_TTL_MS)
end

-- The queue of listening waiters of the scope at KEYS[at] (fastlock.locks.notify): zset
-- `<wake>q` (score: the server's µs at entry plus the waiter's patience: the order in which
-- their patience ends, FIFO among equal patiences; a waiter that waited its turn in its
-- client comes with that much less) and zset `<wake>a` (score: ms until which
-- the waiter is alive; each attempt renews it). Members
-- "<db>:<ttl_ms>:<fencing 0/1>:<patience ms>:<wait>:<job>", made by the client (<wait>: an id
-- of that wait, no ':', starting with "s" when the waiter listens on a cluster's sharded
-- channel; patience: see hand_over). Both keys derive from the wake list's name: the
-- same cluster slot, which the channel "<wake>@<db>" shares (its hash tag).
-- #const
local QUEUE_ALIVE_MS = 3000 -- a waiter that stops attempting is skipped after this
local QUEUE_MAX = 10000     -- waiters past this many wait on their re-checks only
local HAND_TRIES = 8        -- dead queue heads skipped per release, at most

local function now_ms()
  local t = redis.call("TIME")
  return t[1] * 1000 + math.floor(t[2] / 1000), t
end

-- Enter (or keep) `member` in the queue and renew its life.
local function enqueue(at, member)
  local wake = KEYS[at]
  local queue, alive = wake .. "q", wake .. "a"
  local ms, t = now_ms()
  if redis.call("ZCARD", queue) >= QUEUE_MAX and not redis.call("ZSCORE", queue, member) then
    return
  end
  local patience = string.match(member, "^%d+:%d+:%d:(%d+):")
  redis.call("ZADD", queue, "NX", t[1] * 1000000 + t[2] + (patience or 0) * 1000, member)
  redis.call("ZADD", alive, ms + QUEUE_ALIVE_MS, member)
  redis.call("PEXPIRE", queue, QUEUE_ALIVE_MS)
  redis.call("PEXPIRE", alive, QUEUE_ALIVE_MS)
end

-- A member's fields: db, ttl ms, fenced, patience ms, wait, job
local function parse_member(member)
  return string.match(member, "^(%d+):(%d+):(%d):(%d+):([^:]*):(.*)$")
end

-- Take `member` off the queue; its life goes with it (a member has one only while queued).
local function dequeue(at, member)
  local wake = KEYS[at]
  if redis.call("ZREM", wake .. "q", member) == 1 then
    redis.call("ZREM", wake .. "a", member)
  end
end

-- Whether a live queued waiter other than `job` heads the queue (dead heads are dropped).
local function queued_ahead(at, job)
  local wake = KEYS[at]
  local queue, alive = wake .. "q", wake .. "a"
  local ms = nil
  for _ = 1, HAND_TRIES do
    local head = redis.call("ZRANGE", queue, 0, 0)[1]
    if not head or select(6, parse_member(head)) == job then
      return false
    end
    ms = ms or now_ms()
    local life = redis.call("ZSCORE", alive, head)
    if life and life + 0 >= ms then
      return true
    end
    dequeue(at, head)
  end
  return false
end

-- Give slot `key` of the scope at KEYS[at] to the first live queued waiter (none of
-- `values`, the slots' values, held by it) once it has waited its patience: its token is set
-- as holder (its <waited> `bits` those of the slot released: the waiters behind it still wait
-- on it) and it is told on its db's channel "<wake>@<db>" ("<token>:<wait>:<job>": that wait
-- alone takes it; SPUBLISH for a wait id starting with "s", so the message stays on the
-- shard). A head younger than its patience is left queued and the slot to be freed (a running
-- caller may take it first): the head is told to try again ("0:<wait>:<job>"), once (the
-- marker "<wake>n" holds the head last told, for its patience). Returns the waiter's job, or nil.
local function hand_over(at, key, values, limit, scope, max_history, bits)
  local wake = KEYS[at]
  local queue, alive = wake .. "q", wake .. "a"
  local ms, us = nil, nil
  for _ = 1, HAND_TRIES do
    local found = redis.call("ZRANGE", queue, 0, 0, "WITHSCORES")
    local head = found[1]
    if not head then
      return nil
    end
    if not ms then
      local t
      ms, t = now_ms()
      us = t[1] * 1000000 + t[2]
    end
    local db, ttl, fenced, patience, wait, job = parse_member(head)
    local holding = false
    for i = 1, limit do
      if values[i] and select(3, parse_slot(values[i])) == job then
        holding = true
      end
    end
    local young = job and us < found[2] + 0
    local live = young and patience + 0 < QUEUE_ALIVE_MS -- queued for less than a life: alive
    if job and not live then
      local life = redis.call("ZSCORE", alive, head)
      live = life and life + 0 >= ms
    end
    local publish = job and string.byte(wait) == 115 and "SPUBLISH" or "PUBLISH" -- 115: "s"
    if live and not holding then
      if young then
        if redis.call("SET", wake .. "n", head, "PX", patience, "GET") ~= head then
          redis.call(publish, wake .. "@" .. db, "0:" .. wait .. ":" .. job)
        end
        return nil
      end
      dequeue(at, head)
      local token = fenced == "1" and redis.call("INCR", K_SEQ) or 1
      local value = string.format("%d:%d:", token, bits) .. job
      if ttl ~= "0" then
        redis.call("SET", key, value, "PX", ttl)
      else
        redis.call("SET", key, value)
      end
      changelog(max_history, "locked", scope, job, token)
      redis.call(publish, wake .. "@" .. db, string.format("%d:", token) .. wait .. ":" .. job)
      return job
    end
    dequeue(at, head)
  end
  return nil
end
