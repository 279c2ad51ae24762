-- until_and_while_executing at job start: release the job's queue-time slot and take a
-- runtime slot, atomically (both scopes live in one bucket, so in one cluster slot).
-- KEYS: index, counter, changelog, then the queue-time scope (wake, slots 1..limit), then
--       the runtime scope (wake, slots 1..limit) (shared/_lock_slots.lua)
-- ARGV: job_id, queue scope, runtime scope, ttl_ms, flags (as lock_acquire), max_history
--       (absent when 0)
-- Returns what lock_acquire returns for the runtime scope.
-- #include "shared/_lock_acquire.lua"
-- #include "shared/_lock_release.lua"

local job, queue, runtime = ARGV[1], ARGV[2], ARGV[3]
local ttl, flags, max_history = ARGV[4], ARGV[5] + 0, (ARGV[6] or 0) + 0
local limit = (#KEYS - FIRST_SCOPE - 1) / 2
release(FIRST_SCOPE, limit, queue, job, "", flags % (2 * TRACK) >= TRACK, max_history)
return acquire(FIRST_SCOPE + 1 + limit, limit, runtime, job, ttl, flags, max_history)
