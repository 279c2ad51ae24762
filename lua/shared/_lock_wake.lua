-- #include "shared/_lock_slots.lua"
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
  redis.call("PUBLISH", wake, "1") -- the clients' listeners (fastlock.locks.notify)
end
