-- Enqueue one job: never over an existing one (HSETNX, for fresh and custom ids alike).
-- KEYS: a plain job's call (ARGV: id and payload only) the queue's first 3 keys; any other
-- the producer keys (7), then the TTL unique lock key (mode 't' only).
-- ARGV: id, payload, then for any job but a plain one: delay ms, priority or '', unique mode
-- ('', 'd' until done, 's' until started, 't' until the TTL), digest, TTL ms.
-- Returns {1, id}, or {0, owner id} for a duplicate (id taken or unique lock held).
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
if held then
  if redis.call("HSETNX", K_UNIQUE, digest, id) == 0 then
    return {0, redis.call("HGET", K_UNIQUE, digest)}
  end
elseif mode == "t" then
  if not redis.call("SET", KEYS[8], id, "NX", "PX", ARGV[7]) then
    return {0, redis.call("GET", KEYS[8])}
  end
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
