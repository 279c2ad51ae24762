-- Renew leases: each member still in the lease index gets the deadline now + ARGV[1] ms
-- (a lease past its deadline that nobody recovered yet is renewed too).
-- KEYS: the queue's keys. ARGV: lease ms, then lease members.
-- Returns {now, indexes of lost members...}.
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
return {now, unpack(lost)}
