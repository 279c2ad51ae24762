-- One page of a queue's jobs in one state, in the order they will be claimed, expire or
-- were buried. KEYS: the queue's keys. ARGV: state ('ready', 'delayed', 'active' or
-- 'dead'), offset, count (bounded by the client).
-- Returns {now ms, total in that state, entry, score, payload size, error info, ...}: the
-- entry is a word (ready: plain lane first, then the prioritised lane; delayed: score =
-- due ms), a lease member (active: score = deadline ms) or an id (dead: score = died ms,
-- error info "<attempts>|<priority>|<error>"); payload size -1 when the payload is gone.
-- #include "shared/_queue_keys.lua"
-- #include "shared/_queue_words.lua"
local state, offset, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local rows, total = {}, 0

local function add_range(key, start, stop, scored)
  local found = redis.call("ZRANGE", key, start, stop, "WITHSCORES")
  for i = 1, #found, 2 do
    rows[#rows + 1] = {found[i], scored and found[i + 1] or ""}
  end
end

if state == "ready" then
  local plain, skip = redis.call("LLEN", K_READY), 0
  if plain > 0 and redis.call("LINDEX", K_READY, -1) == PAUSED then -- not a job
    plain, skip = plain - 1, 1
  end
  total = plain + redis.call("ZCARD", K_PRIO)
  if offset < plain then -- the plain lane is claimed from its tail
    local found = redis.call("LRANGE", K_READY, -(offset + skip + count), -(offset + skip + 1))
    for i = #found, 1, -1 do
      rows[#rows + 1] = {found[i], ""}
    end
  end
  if #rows < count and offset + #rows < total then
    local start = math.max(offset - plain, 0)
    add_range(K_PRIO, start, start + count - #rows - 1, false)
  end
else
  local key = ({delayed = K_DELAYED, active = K_ACTIVE, dead = K_DEAD})[state]
  total = redis.call("ZCARD", key)
  add_range(key, offset, offset + count - 1, true)
end

local reply = {now_ms(), total}
local errors = {}
if state == "dead" and #rows > 0 then
  local ids = {}
  for i, row in ipairs(rows) do
    ids[i] = row[1]
  end
  errors = redis.call("HMGET", K_ERR, unpack(ids))
end
for i, row in ipairs(rows) do
  local entry, id = row[1], row[1]
  if state ~= "dead" then
    local word = entry
    if state == "active" then
      word = select(2, split_member(entry))
    end
    id = select(4, split_word(word))
  end
  local size = redis.call("HSTRLEN", K_DATA, id)
  if size == 0 and redis.call("HEXISTS", K_DATA, id) == 0 then
    size = -1
  end
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = entry, row[2], size, errors[i] or false
end
return reply
