-- Acquire a slot of one lock scope for a job.
-- KEYS: index, counter, changelog, then the scope: wake, slot 1..limit (shared/_lock_slots.lua)
-- ARGV: job_id, scope, ttl_ms (0: no expiry), flags (shared/_lock_flags.lua), max_history
--       (absent when 0: every argument sent costs the server instructions), then with QUEUED
--       or DEQUEUED the waiter's queue member (shared/_lock_wake.lua)
-- Returns the fencing token, or {ms until a slot may expire (-1: never), holder job ids...}.
-- #include "shared/_lock_acquire.lua"

local job, scope = ARGV[1], ARGV[2]
local ttl, flags, max_history = ARGV[3], ARGV[4] + 0, (ARGV[5] or 0) + 0
return acquire(FIRST_SCOPE, #KEYS - FIRST_SCOPE, scope, job, ttl, flags, max_history, ARGV[6])
