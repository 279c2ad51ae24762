-- Look up one job by id. KEYS: the queue's keys, the cancelled set, then the job's progress
-- key (the last).
-- ARGV: id, search window (entries at each end of each structure, shared/_queue_find.lua),
-- preview bytes.
-- Returns {state, entry, score, payload size (-1: none), preview, error info, progress (JSON
-- text or false)}: state is
-- 'dead' (entry '', score = died ms, error info "<attempts>|<priority>|<error>"), 'active'
-- (entry = lease member, score = deadline ms), 'ready' or 'delayed' (entry = word; score =
-- due ms for delayed, '' for ready), 'queued' (payload present, not found in the windows),
-- 'cancelled' (cancelled while it ran: score = when, ms) or 'missing' (no such job:
-- completed, purged, cancelled while waiting or never enqueued).
-- #include "shared/_queue_find.lua"
local id, window, preview = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local progress = redis.call("GET", KEYS[#KEYS])
local size, head = -1, false
if id ~= DATA_PIN and redis.call("HEXISTS", K_DATA, id) == 1 then
  size = redis.call("HSTRLEN", K_DATA, id)
  if preview > 0 and size > 0 and size <= 1048576 then -- a larger payload: no preview
    head = string.sub(redis.call("HGET", K_DATA, id), 1, preview)
  end
end
local died = redis.call("ZSCORE", K_DEAD, id)
if died then
  return {"dead", "", died, size, head, redis.call("HGET", K_ERR, id), progress}
end
if size < 0 then
  local cancelled = redis.call("ZSCORE", KEYS[13], id)
  if cancelled then -- cancelled while it ran (queue_cancel.lua)
    return {"cancelled", "", cancelled, size, false, false, progress}
  end
  return {"missing", "", "", size, false, false, progress}
end
local kind, entry, score = find_job(id, window)
if kind == "prio" then
  kind, score = "ready", ""
end
return {kind or "queued", entry or "", score or "", size, head, false, progress}
