-- #include "shared/_queue_keys.lua"
-- Putting words where workers claim them, and waking the workers that wait.

local function wake()
  redis.call("ZADD", K_WAKE, "0", "w")
end

-- Append plain words (no priority) to the tail of ready; wake a waiting worker when
-- `notify` and ready was empty. Returns ready's length.
local function push_plain(words, notify)
  local length = redis.call("LPUSH", K_READY, unpack(words))
  if length == #words and notify then
    wake()
  end
  return length
end

-- Append words to ready: plain ones at the tail of the list, prioritised ones at the tail
-- of their level (prio score = priority * 2^32 + (seq mod 2^32)). Wakes a waiting worker
-- when `notify` and ready was empty (or prioritised).
local function push_ready(words, notify)
  local plain, prio = words, {} -- all plain (the usual case): no copy
  for _, word in ipairs(words) do
    if not string.find(word, "^%d+||") then
      prio[#prio + 1] = word
    end
  end
  if #prio > 0 then
    plain = {}
    for _, word in ipairs(words) do
      if string.find(word, "^%d+||") then
        plain[#plain + 1] = word
      end
    end
  end
  if #plain > 0 then
    push_plain(plain, notify and #prio == 0)
  end
  if #prio == 0 then
    return
  end
  local n = #prio
  local seq = redis.call("INCRBY", K_SEQ, n) - n
  local args = {}
  for i, word in ipairs(prio) do -- newest first: see push_delayed
    local level = string.match(word, "^%d+|([^|]*)|")
    args[2 * (n - i) + 1] = int(level * 4294967296 + (seq + i) % 4294967296)
    args[2 * (n - i) + 2] = word
  end
  redis.call("ZADD", K_PRIO, unpack(args, 1, 2 * n))
  if notify then
    wake()
  end
end
