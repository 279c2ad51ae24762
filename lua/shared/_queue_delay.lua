-- #include "shared/_queue_push.lua"
-- Park words until `due` (server ms); an idle worker wakes to shorten its wait. The words go
-- to ZADD newest first: in a small (listpack) sorted set an insert scans from the head to its
-- place, so each then stops at the batch's first member instead of passing the whole batch.
local function push_delayed(words, due)
  local args, score, n = {}, int(due), #words
  for i, word in ipairs(words) do
    args[2 * (n - i) + 1] = score
    args[2 * (n - i) + 2] = word
  end
  redis.call("ZADD", K_DELAYED, unpack(args, 1, 2 * n))
  wake()
end
