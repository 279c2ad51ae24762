-- Enqueue a batch of jobs with fresh ids: one HSET and one push for the whole batch. Fresh
-- ids start with a mark no custom id may start with, so this HSET overwrites no job.
-- KEYS: the queue's producer keys (7). ARGV: delay ms, priority or '', then id, payload pairs.
-- Returns the number of jobs enqueued.
-- #include "shared/_queue_keys.lua"
local delay, priority = tonumber(ARGV[1]), ARGV[2]
local fields, words = {}, {}
for i = 3, #ARGV, 2 do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
  words[#words + 1] = '0|' .. priority .. '||' .. ARGV[i]
end
redis.call('HSET', K_DATA, unpack(fields))
if delay > 0 then
  push_delayed(words, now_ms() + delay)
else
  push_ready(words, true)
end
return #words
