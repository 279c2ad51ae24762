-- Release the slot a job holds in one lock scope.
-- KEYS: index, counter, changelog, then the scope: wake, slot 1..limit (shared/_lock_slots.lua)
-- ARGV: job_id, scope, expected token ("": any), track (0/1), max_history (absent when 0),
--       then, for a listening waiter that leaves (cancelled), its queue member: dequeued first
-- Returns the freed fencing token, or 0 when the job held nothing.
-- #include "shared/_lock_release.lua"

local job, scope, expect = ARGV[1], ARGV[2], ARGV[3]
local track, max_history = ARGV[4] == "1", (ARGV[5] or 0) + 0
if ARGV[6] then
  dequeue(FIRST_SCOPE, ARGV[6])
end
return release(FIRST_SCOPE, #KEYS - FIRST_SCOPE, scope, job, expect, track, max_history)
