-- Lock slots. A lock scope (a digest, or its ":run" runtime copy) holds up to `limit`
-- string keys, one per holder, each valued "<token>:<waited>:<job_id>" and expiring on its
-- own (PX = the lock ttl), so a dead holder frees only its own slot. <waited> is a digit of
-- two bits: BLOCKED (1) once an acquirer without a listener may be waiting on the scope's
-- wake list (releasing the slot wakes one), QUEUED_BY (2) once a listening acquirer may be
-- queued for it (releasing the slot looks for one to hand it to).
--
-- KEYS of every lock script: the bucket's keys below, then the scopes it acts on. A scope
-- "at" KEYS[at] is its wake list KEYS[at] and its slot keys KEYS[at + 1 .. at + limit]; the
-- first scope is at FIRST_SCOPE. All keys carry the bucket's hash tag: one cluster slot.
local K_INDEX = KEYS[1] -- zset: member "<scope>#<limit>", score 0, paged by lex
local K_SEQ = KEYS[2]   -- string: the bucket's fencing counter
local K_LOG = KEYS[3]   -- stream: the bucket's changelog
-- #const
local FIRST_SCOPE = 4
local BLOCKED, QUEUED_BY = 1, 2

-- `bits` (a <waited> digit's number) has `bit`
local function has_bit(bits, bit)
  return bits % (2 * bit) >= bit
end

local function parse_slot(value)
  return string.match(value, "^(%d+):(%d):(.*)$")
end

-- The scope's member in the bucket index (the common limit 1 spelt out: a number
-- concatenated is formatted with %.14g, the costliest part).
local function index_member(scope, limit)
  if limit == 1 then
    return scope .. "#1"
  end
  return scope .. "#" .. limit
end

-- Values of the `limit` slot keys from KEYS[first] on (false for a free slot).
local function read_slots(first, limit)
  if limit == 1 then
    return { redis.call("GET", KEYS[first]) }
  end
  return redis.call("MGET", unpack(KEYS, first, first + limit - 1))
end

-- Changelog entry in the bucket's stream (trimmed to max_history); off when max_history is 0
-- (the hot paths test that before the call).
local function changelog(max_history, event, scope, job, token)
  if max_history > 0 then
    redis.call("XADD", K_LOG, "MAXLEN", max_history, "*", "event", event, "lock", scope, "job", job,
      "token", token)
  end
end
