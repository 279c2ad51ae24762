-- Enqueue a batch of jobs with fresh ids: one HSET and one push for the whole batch. Fresh
-- ids start with a mark no custom id may start with, so this HSET overwrites no job.
-- KEYS: the queue's producer keys (7). ARGV: delay ms, priority or '', then id, payload pairs.
-- Returns the number of jobs enqueued.
-- #include "shared/_queue_keys.lua"
local delay, priority = tonumber(ARGV[1]), ARGV[2]
local words = {}
for i = 3, #ARGV, 2 do
  words[(i - 1) / 2] = '0|' .. priority .. '||' .. ARGV[i]
end
redis.call('HSET', K_DATA, unpack(ARGV, 3))
if delay > 0 then
  push_delayed(words, now_ms() + delay)
else
  push_ready(words, true)
end
return #words
