-- Renew leases: each member still in the lease index gets the deadline now + ARGV[1] ms
-- (a lease past its deadline that nobody recovered yet is renewed too).
-- KEYS: the queue's keys. ARGV: lease ms, then lease members.
-- Returns {now, indexes of lost members...}.
-- #include "shared/_queue_keys.lua"
local now = now_ms()
local members = {}
for i = 2, #ARGV do
  members[#members + 1] = ARGV[i]
end
local scores = redis.call('ZMSCORE', K_ACTIVE, unpack(members))
local deadline = int(now + tonumber(ARGV[1]))
local leases, reply = {}, {now}
for i, member in ipairs(members) do
  if scores[i] then
    leases[#leases + 1] = deadline
    leases[#leases + 1] = member
  else
    reply[#reply + 1] = i
  end
end
if #leases > 0 then
  redis.call('ZADD', K_ACTIVE, 'XX', unpack(leases))
end
return reply
