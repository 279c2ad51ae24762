-- Keys and helpers shared by every queue script (layout: docs/queues.md, fastlock.queues.calls).
-- Every queue script receives the queue's KEYS in this order, all under the queue's {tag}:
-- the enqueue scripts the first 7 (the producer's keys), claim and complete the first 10,
-- the others all 12 (each key a script is sent costs the server's Lua about 1.7k instructions).
local K_READY, K_PRIO, K_SEQ, K_DELAYED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_DATA, K_UNIQUE, K_WAKE = KEYS[5], KEYS[6], KEYS[7]
local K_ACTIVE, K_FENCE, K_DONE = KEYS[8], KEYS[9], KEYS[10]
local K_DEAD, K_ERR = KEYS[11], KEYS[12]

local PRIORITY_SPAN = 4294967296 -- prio score = priority * 2^32 + (seq mod 2^32)

-- Integers go to Redis through %d: plain Lua number-to-string keeps only 14 digits. (A Lua
-- number given to redis.call is formatted with %.17g, the costliest thing such a call does:
-- pass strings, such as '0' or the caller's ARGV, where the value is known.)
local function int(n)
  return string.format('%d', n)
end

-- Server time in ms: every deadline and due time comes from the server clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Job words "<attempts>|<priority>|<unique>|<id>" and lease members "<token>|<word>" (the
-- current attempt counted) are specified in docs/queues.md, "Job words and lease members";
-- the client's definition of a member is fastlock.queues.jobs.Member.
local function split_word(word)
  return string.match(word, '^(%d+)|([^|]*)|([^|]*)|(.*)$')
end

local function split_member(member)
  return string.match(member, '^(%d+)|(.*)$')
end

-- A lease member's token, unique and id (split_member, then split_word, in one match).
local function split_lease(member)
  return string.match(member, '^(%d+)|%d+|[^|]*|([^|]*)|(.*)$')
end

local function wake()
  redis.call('ZADD', K_WAKE, '0', 'w')
end

-- Append words to ready: plain ones at the tail of the list, prioritised ones at the tail
-- of their level. Wakes a waiting worker when `notify` and ready was empty (or prioritised).
local function push_ready(words, notify)
  local plain, prio = words, {} -- all plain (the usual case): no copy
  for _, word in ipairs(words) do
    if not string.find(word, '^%d+||') then
      prio[#prio + 1] = word
    end
  end
  if #prio > 0 then
    plain = {}
    for _, word in ipairs(words) do
      if string.find(word, '^%d+||') then
        plain[#plain + 1] = word
      end
    end
  end
  local woken = false
  if #plain > 0 and redis.call('LPUSH', K_READY, unpack(plain)) == #plain then
    woken = true
  end
  if #prio > 0 then
    local n = #prio
    local seq = redis.call('INCRBY', K_SEQ, int(n)) - n
    local args = {}
    for i, word in ipairs(prio) do -- newest first: see push_delayed
      local level = tonumber(string.match(word, '^%d+|([^|]*)|'))
      args[2 * (n - i) + 1] = int(level * PRIORITY_SPAN + (seq + i) % PRIORITY_SPAN)
      args[2 * (n - i) + 2] = word
    end
    redis.call('ZADD', K_PRIO, unpack(args, 1, 2 * n))
    woken = true
  end
  if woken and notify then
    wake()
  end
end

-- Park words until `due` (server ms); an idle worker wakes to shorten its wait. The words go
-- to ZADD newest first: in a small (listpack) sorted set an insert scans from the head to its
-- place, so each then stops at the batch's first member instead of passing the whole batch.
local function push_delayed(words, due)
  local args, score, n = {}, int(due), #words
  for i, word in ipairs(words) do
    args[2 * (n - i) + 1] = score
    args[2 * (n - i) + 2] = word
  end
  redis.call('ZADD', K_DELAYED, unpack(args, 1, 2 * n))
  wake()
end

-- Release unique locks ({digest, id} pairs; nil: none) that these jobs still own: compare,
-- then delete.
local function release_unique(locks)
  if not locks or #locks == 0 then
    return
  end
  local digests = {}
  for i, lock in ipairs(locks) do
    digests[i] = lock[1]
  end
  local owners = redis.call('HMGET', K_UNIQUE, unpack(digests))
  local free = {}
  for i, lock in ipairs(locks) do
    if owners[i] == lock[2] then
      free[#free + 1] = lock[1]
    end
  end
  if #free > 0 then
    redis.call('HDEL', K_UNIQUE, unpack(free))
  end
end

-- The 'd' (until done) lock of a word, as a release_unique pair, or nil.
local function done_lock(unique, id)
  if string.sub(unique, 1, 1) == 'd' then
    return {string.sub(unique, 2), id}
  end
end

-- Dead-letter words at `now`: the dead set gets the id, K_ERR "<attempts>|<priority>|<error>";
-- their until-done unique locks are released (a dead job is finished).
local function bury(words, error, now)
  local dead, errors, locks = {}, {}, {}
  for i, word in ipairs(words) do
    local attempts, priority, unique, id = split_word(word)
    dead[2 * i - 1] = int(now)
    dead[2 * i] = id
    errors[2 * i - 1] = id
    errors[2 * i] = attempts .. '|' .. priority .. '|' .. error
    locks[#locks + 1] = done_lock(unique, id)
  end
  redis.call('ZADD', K_DEAD, unpack(dead))
  redis.call('HSET', K_ERR, unpack(errors))
  release_unique(locks)
end
