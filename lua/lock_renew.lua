-- Renew many held locks of one cluster slot (the lock watchdog, locks/renewal.py): reset each
-- holder's slot expiry only while that holder still holds it with that fencing token.
-- KEYS: each lock's slot keys, lock after lock (its limit of them; shared/_lock_slots.lua)
-- ARGV: per lock: limit, job_id, token, ttl_ms
-- Returns per lock 1 (renewed) or 0 (its holder no longer holds it with that token).
-- #include "shared/_lock_slots.lua"

local renewed, first = {}, 1
for at = 1, #ARGV, 4 do
  local limit, job, token = tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2]
  local values, found = read_slots(first, limit), 0
  for i = 1, limit do
    if values[i] then
      local held, _, holder = parse_slot(values[i])
      if holder == job and held == token then
        redis.call("PEXPIRE", KEYS[first + i - 1], ARGV[at + 3])
        found = 1
        break
      end
    end
  end
  renewed[#renewed + 1] = found
  first = first + limit
end
return renewed
