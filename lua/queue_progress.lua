-- Set a leased job's progress, fenced: only while its lease member is in the lease index.
-- KEYS: the queue's keys, then the job's progress key (fl:{q}:p:<id>, the last).
-- ARGV: lease member, progress (JSON text, size-capped by the client), keep ms.
-- Returns 1, or 0 when the lease is no longer the caller's (recovered, re-claimed, completed,
-- failed or cancelled).
-- #include "shared/_queue_keys.lua"
if not redis.call("ZSCORE", K_ACTIVE, ARGV[1]) then
  return 0
end
redis.call("SET", KEYS[#KEYS], ARGV[2], "PX", ARGV[3])
return 1
