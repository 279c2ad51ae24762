-- Cancel one job: a waiting one loses its word (ready, prioritised or delayed), its payload
-- and its until_executed / until_executing unique lock; a running (leased) one its lease,
-- its payload and its until_executed lock, and its id joins the cancelled set (its holder's
-- next extend answers it cancelled; the newest `kept` ids are remembered).
-- KEYS: the queue's keys, then the cancelled set. ARGV: id, search window
-- (shared/_queue_find.lua), kept.
-- Returns {done, state}: {1, 'ready' | 'delayed' | 'active'} when cancelled; {0, state} when
-- refused: 'dead' (use purge_dead), 'queued' (not found in the search windows: deeper in a
-- long backlog) or 'missing' (no such job).
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
  redis.call("ZREM", K_ACTIVE, word)
  local _, rest = split_member(word)
  word = rest
  redis.call("ZADD", KEYS[13], int(now_ms()), id)
  redis.call("ZREMRANGEBYRANK", KEYS[13], "0", -tonumber(ARGV[3]) - 1)
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
