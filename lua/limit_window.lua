-- A sliding window (a log, exact to the millisecond) on one key. KEYS[1]: the limiter's key, a
-- string: the admitted count (4 bytes), then one entry per millisecond with admissions, oldest
-- first: the server time in us of its latest admission (a double) and their n (4 bytes).
-- ARGV: window ms, limit, n. Admits n when the admissions of the last window ms and n make at
-- most limit. Returns {admitted (1/0), remaining (how many more would be admitted now), retry
-- after us (0 when admitted)}. Entries <= limit and <= the window's ms: bounded.
local t = redis.call("TIME")
local now = t[1] * 1000000 + t[2]
local window, limit, n = ARGV[1] * 1000, tonumber(ARGV[2]), tonumber(ARGV[3])
local data = redis.call("GET", KEYS[1])
local live, total, pos = "", 0, 5
if data then
  total = struct.unpack(">I4", data)
  local cutoff, size = now - window, #data
  while pos <= size do -- drop the entries out of the window
    local at, count, next_pos = struct.unpack(">dI4", data, pos)
    if at > cutoff then
      break
    end
    total, pos = total - count, next_pos
  end
  live = string.sub(data, pos)
end
if total + n > limit then -- admitted once the oldest (total + n - limit) have left the window
  local need, size = total + n - limit, #data
  while pos <= size do
    local at, count, next_pos = struct.unpack(">dI4", data, pos)
    need, pos = need - count, next_pos
    if need <= 0 then
      return {0, limit - total, math.max(math.ceil(at + window - now), 1)}
    end
  end
end
-- admissions within one millisecond share an entry, stamped with the latest of them: the log
-- stays at most one entry a millisecond (its copy is the cost of a decision), and an admission
-- is remembered as long as the exact log would, or up to 1 ms longer (never admitting more)
local size, count = #live, n
if size >= 12 then
  local last_at, last_n = struct.unpack(">dI4", live, size - 11)
  if math.floor(last_at / 1000) == math.floor(now / 1000) then
    live, count = string.sub(live, 1, size - 12), last_n + n
  end
end
redis.call("SET", KEYS[1], struct.pack(">I4", total + n) .. live .. struct.pack(">dI4", now, count), "PX", ARGV[1])
return {1, limit - total - n, 0}
