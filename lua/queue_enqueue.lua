-- Enqueue one job: never over an existing one (HSETNX, for fresh and custom ids alike).
-- KEYS: a plain job's call (ARGV: id and payload only) the queue's first 3 keys; any other
-- the producer keys (7), then the TTL unique lock key (mode 't' only).
-- ARGV: id, payload, then for any job but a plain one: delay ms, priority or '', unique mode
-- ('', 'd' until done, 's' until started, 't' until the TTL), digest, TTL ms, then on a
-- duplicate unique lock: nothing (keep it), 'r' (replace its job's payload and delay) or 'e'
-- (push its job's due time back) for a job still waiting.
-- Returns {1, id}, {2, owner id} when the owner's waiting job was replaced or extended, or
-- {0, owner id} for a duplicate (id taken, or unique lock held and nothing replaced).
-- #include "shared/_queue_pin.lua"
local id, payload = ARGV[1], ARGV[2]
if #ARGV == 2 then -- a plain job, before anything else is set up (each local costs each call)
  if redis.call("HSETNX", KEYS[2], id, payload) == 0 then
    return {0, id}
  end
  local length = redis.call("LPUSH", KEYS[1], "0|||" .. id)
  if length == 1 then
    redis.call("ZADD", KEYS[3], "0", "w") -- wake (shared/_queue_push.lua)
  elseif length == DATA_PIN_BACKLOG then
    redis.call("HSET", KEYS[2], DATA_PIN, DATA_PIN_VALUE)
  end
  return {1, id}
end
-- #include "shared/_queue_delay.lua"
local priority, mode, digest = ARGV[4] or "", ARGV[5], ARGV[6]
local held = mode == "d" or mode == "s"
local owner
if held then
  if redis.call("HSETNX", K_UNIQUE, digest, id) == 0 then
    owner = redis.call("HGET", K_UNIQUE, digest)
  end
elseif mode == "t" then
  if not redis.call("SET", KEYS[8], id, "NX", "PX", ARGV[7]) then
    owner = redis.call("GET", KEYS[8])
  end
end
if owner then
  if not ARGV[8] then -- on_duplicate "keep"
    return {0, owner}
  end
  -- "replace" (r) or "extend" (e) the owner's job while it waits, never claimed: its word
  -- is the one this call would write with attempts 0 (same priority and mode), found by
  -- ZSCORE in the delayed set or the prioritised lane, or LPOS among the 1000 newest
  -- entries of ready (fastlock.queues.updates.REPLACE_WINDOW).
  local word = "0|" .. priority .. "|" .. (held and mode .. digest or "") .. "|" .. owner
  local due, where = redis.call("ZSCORE", K_DELAYED, word), "delayed"
  if not due then
    if priority ~= "" then
      where = redis.call("ZSCORE", K_PRIO, word) and "prio"
    else
      where = redis.call("LPOS", K_READY, word, "MAXLEN", "1000") and "ready"
    end
  end
  if not where then -- claimed (or gone, or deeper in ready): not touched
    return {0, owner}
  end
  local delay = tonumber(ARGV[3])
  local target = delay > 0 and now_ms() + delay
  if ARGV[8] == "e" then -- debounce: the due time pushed back, never brought forward
    if due and due + 0 >= target then
      return {2, owner}
    end
  else
    redis.call("HSET", K_DATA, owner, payload)
  end
  if not target then -- replaced with no delay: ready now
    if where == "delayed" then
      redis.call("ZREM", K_DELAYED, word)
      push_ready({word}, true)
    end
  elseif where == "delayed" and target >= due + 0 then -- later: no waiting worker to wake
    redis.call("ZADD", K_DELAYED, int(target), word)
  else
    if where == "ready" then
      redis.call("LREM", K_READY, 1, word)
    elseif where == "prio" then
      redis.call("ZREM", K_PRIO, word)
    end
    push_delayed({word}, target)
  end
  return {2, owner}
end
if redis.call("HSETNX", K_DATA, id, payload) == 0 then
  if held then
    redis.call("HDEL", K_UNIQUE, digest)
  elseif mode == "t" then
    redis.call("DEL", KEYS[8])
  end
  return {0, id}
end
local word = "0|" .. priority .. "|" .. (held and mode .. digest or "") .. "|" .. id
if ARGV[3] and ARGV[3] ~= "0" then
  push_delayed({word}, now_ms() + ARGV[3])
elseif priority == "" then
  push_plain({word}, true)
else
  push_ready({word}, true)
end
return {1, id}
