-- The holders of one side of a read-write lock (KEYS: shared/_rwlock.lua). ARGV: side ("r" or "w").
-- Returns {job, token, ms left (-1: no expiry), ...}: the writer, or the live readers (at
-- most 1000, the soonest to expire first).
-- #include "shared/_rwlock.lua"

if ARGV[1] == "w" then
  local token, writer = parse_writer(redis.call("GET", K_WRITER))
  if not writer then
    return {}
  end
  return { writer, token + 0, redis.call("PTTL", K_WRITER) }
end
local now = now_ms()
local readers = redis.call("ZRANGE", K_READERS, string.format("(%d", now), "+inf", "BYSCORE", "LIMIT", 0, 1000,
  "WITHSCORES")
if #readers == 0 then
  return {}
end
local jobs = {}
for i = 1, #readers, 2 do
  jobs[#jobs + 1] = readers[i]
end
local values = redis.call("HMGET", K_TOKENS, unpack(jobs))
local found = {}
for i = 1, #jobs do
  local token = live_reader(values[i], now)
  if token then
    local expiry = readers[2 * i]
    found[#found + 1] = jobs[i]
    found[#found + 1] = token + 0
    found[#found + 1] = expiry == "inf" and -1 or expiry - now
  end
end
return found
