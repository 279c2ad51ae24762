-- Pause or resume claims (ARGV[1]: "pause" or "resume"): the pause marker put at ready's
-- tail, or taken off it and a waiting worker woken. KEYS: the queue's first 3 keys.
-- Returns 1 when the state changed, 0 when the queue already was so.
-- #include "shared/_queue_push.lua"
local paused = redis.call("LINDEX", K_READY, -1) == PAUSED
if ARGV[1] == "pause" then
  if paused then
    return 0
  end
  redis.call("RPUSH", K_READY, PAUSED)
  return 1
end
if not paused then
  return 0
end
redis.call("RPOP", K_READY)
wake()
return 1
