-- #include "shared/_queue_words.lua"
-- #include "shared/_queue_unique.lua"
-- Find a job by id without an index, in bounded work: the `window` entries at each end of
-- the lease index, the prioritised lane, the ready list and the delayed set (each end: the
-- next to be claimed or expire, and the newest). A job deeper in a longer backlog is not
-- found. Returns kind ('active', 'prio', 'ready', 'delayed'), the word or member, its
-- score ('' for the ready list) and, for the ready list, the LREM count that removes it
-- from the end where it was found (-1: the tail, 1: the head); or nil.

local function id_of(entry, leased)
  if leased then
    local _, word = split_member(entry)
    entry = word or ""
  end
  local _, _, _, id = split_word(entry)
  return id
end

local function find_in_zset(key, kind, id, window)
  local size = redis.call("ZCARD", key)
  local ranges = size > 2 * window and {{0, window - 1}, {-window, -1}} or {{0, -1}}
  for _, range in ipairs(ranges) do
    local found = redis.call("ZRANGE", key, range[1], range[2], "WITHSCORES")
    for i = 1, #found, 2 do
      if id_of(found[i], kind == "active") == id then
        return kind, found[i], found[i + 1]
      end
    end
  end
end

local function find_in_ready(id, window)
  local size = redis.call("LLEN", K_READY)
  local ranges = size > 2 * window and {{-window, -1, -1}, {0, window - 1, 1}} or {{0, -1, 1}}
  for _, range in ipairs(ranges) do
    local found = redis.call("LRANGE", K_READY, range[1], range[2])
    for i = 1, #found do
      if id_of(found[i], false) == id then
        return "ready", found[i], "", range[3]
      end
    end
  end
end

local function find_job(id, window)
  local kind, entry, score, side = find_in_zset(K_ACTIVE, "active", id, window)
  if not kind then
    kind, entry, score, side = find_in_ready(id, window)
  end
  if not kind then
    kind, entry, score = find_in_zset(K_PRIO, "prio", id, window)
  end
  if not kind then
    kind, entry, score = find_in_zset(K_DELAYED, "delayed", id, window)
  end
  return kind, entry, score, side
end
