-- Cancel one waiting job: remove its word (ready, prioritised or delayed), its payload and
-- its until_executed / until_executing unique lock. KEYS: the queue's keys. ARGV: id,
-- search window (shared/_queue_find.lua).
-- Returns {done, state}: {1, 'ready' | 'delayed'} when cancelled; {0, state} when refused:
-- 'active' (leased: its worker decides), 'dead' (use purge_dead), 'queued' (not found in
-- the search windows: deeper in a long backlog) or 'missing' (no such job).
-- #include "shared/_queue_find.lua"
local id, window = ARGV[1], tonumber(ARGV[2])
if redis.call("ZSCORE", K_DEAD, id) then
  return {0, "dead"}
end
if id == DATA_PIN or redis.call("HEXISTS", K_DATA, id) == 0 then
  return {0, "missing"}
end
local kind, word, _, side = find_job(id, window)
if not kind then
  return {0, "queued"}
elseif kind == "active" then
  return {0, "active"}
elseif kind == "ready" then
  redis.call("LREM", K_READY, side, word)
elseif kind == "prio" then
  redis.call("ZREM", K_PRIO, word)
  kind = "ready"
else
  redis.call("ZREM", K_DELAYED, word)
end
redis.call("HDEL", K_DATA, id)
local _, _, unique = split_word(word)
local mode = string.sub(unique, 1, 1)
if mode == "d" or mode == "s" then
  release_unique({{string.sub(unique, 2), id}})
end
return {1, kind}
