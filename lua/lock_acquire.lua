-- Acquire a slot of one lock scope for a job (see shared/_lock_slots.lua for KEYS).
-- KEYS: index, counter, changelog, wake, slot 1..limit
-- ARGV: job_id, scope, ttl_ms (0: no expiry), flags (1 track, 2 fencing, 4 waiting, 8 waited),
--       max_history
-- Returns the fencing token, or {ms until a slot may expire (-1: never), holder job ids...}.
-- #include "shared/_lock_acquire.lua"

return acquire(4, #KEYS - 4, ARGV[2], ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))
