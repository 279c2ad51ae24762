-- #include "shared/_queue_keys.lua"
-- Release unique locks ({digest, id} pairs; nil: none) that these jobs still own: compare,
-- then delete.
local function release_unique(locks)
  if not locks or #locks == 0 then
    return
  end
  local digests = {}
  for i, lock in ipairs(locks) do
    digests[i] = lock[1]
  end
  local owners = redis.call("HMGET", K_UNIQUE, unpack(digests))
  local free = {}
  for i, lock in ipairs(locks) do
    if owners[i] == lock[2] then
      free[#free + 1] = lock[1]
    end
  end
  if #free > 0 then
    redis.call("HDEL", K_UNIQUE, unpack(free))
  end
end
