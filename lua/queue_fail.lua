-- Fail one leased job: retry it after ARGV[2] ms (0: now), or dead-letter it (ARGV[2] < 0)
-- with the error text ARGV[3]. KEYS: the queue's keys. ARGV[1]: the lease member.
-- Returns 1 (retried), 2 (dead) or 0 (lease lost: the job was recovered or re-claimed).
-- #include "shared/_queue_delay.lua"
-- #include "shared/_queue_bury.lua"
local member, delay = ARGV[1], tonumber(ARGV[2])
if redis.call("ZREM", K_ACTIVE, member) == 0 then
  return 0
end
local _, word = split_member(member)
if delay < 0 then
  bury({word}, ARGV[3], now_ms())
  return 2
end
if delay > 0 then
  push_delayed({word}, now_ms() + delay)
else
  push_ready({word}, true)
end
return 1
