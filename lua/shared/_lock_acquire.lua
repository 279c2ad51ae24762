-- #include "shared/_lock_slots.lua"
-- #include "shared/_lock_flags.lua"
-- #include "shared/_lock_wake.lua"

-- The <waited> bits of a slot taken with `flags`: none unless the acquirer waited; then
-- QUEUED_BY for a listening one (a blocked waiter of the previous holder was woken by its
-- release, or carried over by a hand-over: it flags this holder itself when it conflicts),
-- both for one on the wake list (listening waiters may be queued behind it).
local function waited_bits(flags)
  if flags % (2 * WAITED) < WAITED then
    return 0
  end
  return flags % (2 * LISTENS) >= LISTENS and QUEUED_BY or BLOCKED + QUEUED_BY
end

-- Mint a fencing token (1 when fencing is off) and write `job`'s value into slot `key`, with
-- SET's extra argument `...` ("NX" for a slot that may be held). Returns false and the
-- holder's value when NX found the slot held; else the token, after entering a `first`
-- holder into the bucket index (with TRACK) and logging the change.
local function claim(key, first, scope, limit, job, ttl, flags, max_history, ...)
  local token = flags % (2 * FENCING) >= FENCING and redis.call("INCR", K_SEQ) or 1
  local value = string.format("%d:%d:", token, waited_bits(flags)) .. job
  local old -- GET: the holder's value when NX refused, else false
  if ttl ~= "0" then
    old = redis.call("SET", key, value, "PX", ttl, "GET", ...)
  else
    old = redis.call("SET", key, value, "GET", ...)
  end
  if old then
    return false, old
  end
  if first and flags % (2 * TRACK) >= TRACK then
    redis.call("ZADD", K_INDEX, "0", index_member(scope, limit))
  end
  if max_history > 0 then
    changelog(max_history, "locked", scope, job, token)
  end
  return token
end

-- Take a free slot of the scope at KEYS[at] for `job`; `ttl` is the caller's ARGV string (ms,
-- "0": no expiry), passed to SET as it is (a Lua number would be formatted with %.17g).
-- Idempotent: a job that already holds a slot gets its token back.
-- Returns the fencing token (1 when fencing is off), or on conflict
-- {ms until the first holder's slot expires (-1: none expires), holder job ids...}.
-- With WAITING the holders' slots are flagged so that their release wakes a waiter (BLOCKED,
-- or QUEUED_BY with LISTENS: shared/_lock_slots.lua); on
-- conflict `member` (a listening waiter's) is entered in the scope's queue with QUEUED,
-- removed with DEQUEUED; taking a slot removes it (unless FRESH: a new member, not queued yet).
local function acquire(at, limit, scope, job, ttl, flags, max_history, member)
  local first = at + 1
  local values
  -- FAIR: a live queued waiter ahead of `job` gets a free slot first (by its own next attempt)
  local behind = flags % (2 * FAIR) >= FAIR and queued_ahead(at, job)
  if limit == 1 and not behind then
    local token, old = claim(KEYS[first], true, scope, limit, job, ttl, flags, max_history, "NX")
    if token then
      if member and flags % (2 * FRESH) < FRESH then
        dequeue(at, member)
      end
      return token
    end
    values = { old }
  else
    values = read_slots(first, limit)
    local free, held = nil, 0
    for i = 1, limit do
      if values[i] then
        local token, _, holder = parse_slot(values[i])
        if holder == job then
          return token + 0
        end
        held = held + 1
      elseif not free then
        free = i
      end
    end
    if free and not behind then
      local token = claim(KEYS[at + free], held == 0, scope, limit, job, ttl, flags, max_history)
      if member and flags % (2 * FRESH) < FRESH then
        dequeue(at, member)
      end
      return token
    end
  end
  local conflict, n = { -1 }, 1
  local mine = flags % (2 * LISTENS) >= LISTENS and QUEUED_BY or BLOCKED
  for i = 1, limit do
    if values[i] then
      local token, flag, holder = parse_slot(values[i])
      if holder == job then
        return token + 0
      end
      n = n + 1
      conflict[n] = holder
      if flags % (2 * WAITING) >= WAITING then
        local key = KEYS[at + i]
        local ms = redis.call("PTTL", key)
        if ms >= 0 and (conflict[1] < 0 or ms < conflict[1]) then
          conflict[1] = ms
        end
        local bits = flag + 0
        if not has_bit(bits, mine) then
          redis.call("SET", key, token .. ":" .. (bits + mine) .. ":" .. holder, "KEEPTTL", "XX")
        end
      end
    end
  end
  if flags % (2 * QUEUED) >= QUEUED then
    enqueue(at, member)
  elseif flags % (2 * DEQUEUED) >= DEQUEUED then
    dequeue(at, member)
  end
  changelog(max_history, "conflict", scope, job, 0)
  return conflict
end
