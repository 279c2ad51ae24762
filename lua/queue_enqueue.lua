-- Enqueue one job: never over an existing one (HSETNX, for fresh and custom ids alike).
-- KEYS: the queue's producer keys (7), then the TTL unique lock key (mode 't' only).
-- ARGV: id, payload, delay ms, priority or '', unique mode ('', 'd' until done, 's' until
-- started, 't' until the TTL), digest, TTL ms.
-- Returns {1, id}, or {0, owner id} for a duplicate (id taken or unique lock held).
-- #include "shared/_queue_keys.lua"
local id, payload, delay = ARGV[1], ARGV[2], tonumber(ARGV[3])
local priority, mode, digest = ARGV[4], ARGV[5], ARGV[6]
local held = mode == 'd' or mode == 's'
if held then
  if redis.call('HSETNX', K_UNIQUE, digest, id) == 0 then
    return {0, redis.call('HGET', K_UNIQUE, digest)}
  end
elseif mode == 't' then
  if not redis.call('SET', KEYS[8], id, 'NX', 'PX', ARGV[7]) then
    return {0, redis.call('GET', KEYS[8])}
  end
end
if redis.call('HSETNX', K_DATA, id, payload) == 0 then
  if held then
    redis.call('HDEL', K_UNIQUE, digest)
  elseif mode == 't' then
    redis.call('DEL', KEYS[8])
  end
  return {0, id}
end
local word = '0|' .. priority .. '|' .. (held and mode .. digest or '') .. '|' .. id
if delay > 0 then
  push_delayed({word}, now_ms() + delay)
else
  push_ready({word}, true)
end
return {1, id}
