-- Return up to ARGV[1] expired leases to ready, or to the dead set once they used
-- ARGV[2] attempts. KEYS: the queue's keys.
-- Returns {requeued, dead, more}: more = 1 when the limit was reached (call again).
-- #include "shared/_queue_push.lua"
-- #include "shared/_queue_bury.lua"
local limit, max_attempts = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = now_ms()
local expired = redis.call("ZRANGEBYSCORE", K_ACTIVE, "-inf", "(" .. int(now), "LIMIT", 0, limit)
if #expired == 0 then
  return {0, 0, 0}
end
redis.call("ZREM", K_ACTIVE, unpack(expired))
local retry, dead = {}, {}
for _, member in ipairs(expired) do
  local _, word = split_member(member)
  local attempts = split_word(word)
  if tonumber(attempts) >= max_attempts then
    dead[#dead + 1] = word
  else
    retry[#retry + 1] = word
  end
end
if #retry > 0 then
  push_ready(retry, true)
end
if #dead > 0 then
  bury(dead, "lease expired", now)
end
return {#retry, #dead, #expired == limit and 1 or 0}
