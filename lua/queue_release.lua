-- Hand leased jobs back unstarted (a worker stopping mid-batch): each member still in the
-- lease index goes back to ready with its attempt given back, plain jobs at the head of
-- the list (claimed next, in their order), prioritised ones at the tail of their level.
-- KEYS: the queue's keys. ARGV: lease members (at most 1000).
-- Returns {indexes of lost members} (recovered or re-claimed: no longer the caller's).
-- #include "shared/_queue_leases.lua"
-- #include "shared/_queue_words.lua"
-- #include "shared/_queue_push.lua"
local held, lost = partition(K_ACTIVE, ARGV)
if #held == 0 then
  return lost
end
local members = pick(ARGV, held)
redis.call("ZREM", K_ACTIVE, unpack(members))
local plain, prio = {}, {}
for i = #members, 1, -1 do
  local _, word = split_member(members[i])
  local attempts, priority, unique, id = split_word(word)
  word = int(math.max(tonumber(attempts) - 1, 0)) .. "|" .. priority .. "|" .. unique .. "|" .. id
  if priority == "" then
    plain[#plain + 1] = word
  else
    prio[#prio + 1] = word
  end
end
if #plain > 0 then
  local paused = redis.call("LINDEX", K_READY, -1) == PAUSED
  if paused then -- under the pause marker, which stays at the tail
    plain[#plain + 1] = redis.call("RPOP", K_READY)
  end
  redis.call("RPUSH", K_READY, unpack(plain))
end
push_ready(prio, false)
wake()
return lost
