-- until_and_while_executing at job start: release the job's queue-time slot and take a
-- runtime slot, atomically (both scopes live in one bucket, so in one cluster slot).
-- KEYS: index, counter, changelog, queue wake, queue slots 1..limit, runtime wake,
--       runtime slots 1..limit
-- ARGV: job_id, queue scope, runtime scope, ttl_ms, flags (as lock_acquire), max_history
-- Returns what lock_acquire returns for the runtime scope.
-- #include "shared/_lock_acquire.lua"
-- #include "shared/_lock_release.lua"

local job, flags, max_history = ARGV[1], tonumber(ARGV[5]), tonumber(ARGV[6])
local limit = (#KEYS - 5) / 2
release(4, limit, ARGV[2], job, "", bit.band(flags, TRACK) ~= 0, max_history)
return acquire(5 + limit, limit, ARGV[3], job, tonumber(ARGV[4]), flags, max_history)
