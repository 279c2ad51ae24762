-- Keys and helpers shared by every queue script (layout: docs/queues.md, fastlock.queues.base).
-- Every queue script receives the queue's KEYS in this order, all under the queue's {tag}:
-- a plain enqueue (no delay, priority or unique lock) the first 3, the other enqueues the
-- first 7 (the producer's keys), claim and complete the first 10, the others all 12 (each
-- key a script is sent costs the server work).
-- Each call of a C function (string.sub, tonumber, ...), string.match, closure, table and
-- redis.call costs the server instructions beyond its command (measured in docs/queues.md,
-- "Scripts and what each operation costs"): hot paths keep them few.
-- #include "shared/_queue_pin.lua"
local K_READY, K_DATA, K_WAKE = KEYS[1], KEYS[2], KEYS[3]
local K_PRIO, K_SEQ, K_DELAYED, K_UNIQUE = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local K_ACTIVE, K_FENCE, K_DONE = KEYS[8], KEYS[9], KEYS[10]
local K_DEAD, K_ERR = KEYS[11], KEYS[12]
-- A paused queue holds this word, which no job's word can be, at the tail of ready (where
-- claims pop; producers push at the head, a release under it): a claim that pops it puts
-- it back and claims nothing, so an unpaused claim reads no flag (lua/queue_pause.lua).
local PAUSED = "paused"

-- Integers go to Redis as strings made with %d (a Lua number given to redis.call is
-- formatted with %.17g, exact for integers below 2^53 and as costly; concatenation and
-- tostring keep only 14 digits). Format a value once when several arguments repeat it.
local function int(n)
  return string.format("%d", n)
end

-- Server time in ms: every deadline and due time comes from the server clock.
local function now_ms()
  local t = redis.call("TIME")
  local us = t[2] + 0
  return t[1] * 1000 + (us - us % 1000) / 1000
end
