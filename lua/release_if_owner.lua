-- Delete KEYS[1] only when it still holds ARGV[1] (the caller's token): compare-and-delete.
-- Returns 1 when the key was released, 0 when it had expired or belongs to someone else.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
