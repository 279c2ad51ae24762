-- Reset the expiry of the slot a job holds to ttl_ms (see shared/_lock_slots.lua for KEYS).
-- KEYS: index, counter, changelog, wake, slot 1..limit
-- ARGV: job_id, ttl_ms
-- Returns the job's fencing token, or 0 when it holds nothing (expired or released).
-- #include "shared/_lock_slots.lua"

local limit = #KEYS - 4
local values = read_slots(5, limit)
for i = 1, limit do
  if values[i] then
    local token, _, holder = parse_slot(values[i])
    if holder == ARGV[1] then
      redis.call("PEXPIRE", KEYS[4 + i], ARGV[2])
      return tonumber(token)
    end
  end
end
return 0
