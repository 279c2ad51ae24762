-- Enqueue a batch of jobs with fresh ids: one HSET and one push for the whole batch. Fresh
-- ids start with a mark no custom id may start with, so this HSET overwrites no job; it
-- writes the data hash's pin too (shared/_queue_keys.lua).
-- KEYS: the queue's producer keys (7). ARGV: delay ms, priority or '', then id, payload pairs.
-- Returns the number of jobs enqueued.
-- #include "shared/_queue_delay.lua"
local delay, priority = ARGV[1], ARGV[2]
local words = {}
for i = 3, #ARGV, 2 do
  words[(i - 1) / 2] = "0|" .. priority .. "||" .. ARGV[i]
end
redis.call("HSET", K_DATA, DATA_PIN, DATA_PIN_VALUE, unpack(ARGV, 3))
if delay ~= "0" then
  push_delayed(words, now_ms() + delay)
elseif priority == "" then
  push_plain(words, true)
else
  push_ready(words, true)
end
return #words
