-- The bits of lock_acquire's and lock_handoff's `flags` argument. This line is their only
-- definition: fastlock.locks.types reads it for Python (keep its `local A, B = 1, 2` form).
-- Scripts test a bit as `flags % (2 * BIT) >= BIT`: bit.band would cost a C function call.
-- #const
local TRACK, FENCING, WAITING, WAITED, QUEUED, DEQUEUED, FAIR, LISTENS, FRESH = 1, 2, 4, 8, 16, 32, 64, 128, 256
