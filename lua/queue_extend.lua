-- Renew leases: each member still in the lease index gets the deadline now + ARGV[1] ms
-- (a lease past its deadline that nobody recovered yet is renewed too).
-- KEYS: the queue's keys, then the cancelled set. ARGV: lease ms, then lease members.
-- Returns {now, indexes of lost members...}, the index negated for a job in the cancelled set.
-- #include "shared/_queue_leases.lua"
local now = now_ms()
local members = {}
for i = 2, #ARGV do
  members[#members + 1] = ARGV[i]
end
local held, lost = partition(K_ACTIVE, members)
if #held > 0 then
  local deadline = int(now + tonumber(ARGV[1]))
  local leases = {}
  for j, i in ipairs(held) do
    leases[2 * j - 1] = deadline
    leases[2 * j] = members[i]
  end
  redis.call("ZADD", K_ACTIVE, "XX", unpack(leases))
end
if #lost > 0 then -- which were cancelled (queue_cancel.lua): only when some lease is gone
  local ids = {}
  for j, i in ipairs(lost) do
    ids[j] = string.match(members[i], "^%d+|%d+|[^|]*|[^|]*|(.*)$") or ""
  end
  local cancelled = redis.call("ZMSCORE", KEYS[13], unpack(ids))
  for j, i in ipairs(lost) do
    if cancelled[j] then
      lost[j] = -i
    end
  end
end
return {now, unpack(lost)}
