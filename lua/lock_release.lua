-- Release the slot a job holds in one lock scope (see shared/_lock_slots.lua for KEYS).
-- KEYS: index, counter, changelog, wake, slot 1..limit
-- ARGV: job_id, scope, expected token ("": any), track (0/1), max_history
-- Returns the freed fencing token, or 0 when the job held nothing.
-- #include "shared/_lock_release.lua"

return release(4, #KEYS - 4, ARGV[2], ARGV[1], ARGV[3], ARGV[4] == "1", tonumber(ARGV[5]))
