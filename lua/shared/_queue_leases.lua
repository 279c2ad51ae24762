-- #include "shared/_queue_keys.lua"
-- Lease lookups shared by complete and extend.

-- The items of `list` at `indexes`, in order.
local function pick(list, indexes)
  local items = {}
  for j, i in ipairs(indexes) do
    items[j] = list[i]
  end
  return items
end

-- Split `members` by whether the sorted set `key` holds each one (one ZMSCORE): returns the
-- indexes of those it holds and the indexes of the others, in order.
local function partition(key, members)
  local scores = redis.call("ZMSCORE", key, unpack(members))
  local present, missing = {}, {}
  for i = 1, #members do
    if scores[i] then
      present[#present + 1] = i
    else
      missing[#missing + 1] = i
    end
  end
  return present, missing
end
