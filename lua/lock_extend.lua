-- Reset the expiry of the slots a job holds to ttl_ms.
-- KEYS: index, counter, changelog, then one scope (wake, slot 1..limit), or for
--       until_and_while_executing the runtime then the queue-time scope (shared/_lock_slots.lua)
-- ARGV: job_id, ttl_ms, limit
-- Returns the fencing token of the first scope's slot the job holds, or 0 when it holds
-- nothing (expired or released).
-- #include "shared/_lock_slots.lua"

local job, ttl, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local found = 0
for at = FIRST_SCOPE, #KEYS, limit + 1 do
  local values = read_slots(at + 1, limit)
  for i = 1, limit do
    if values[i] then
      local token, _, holder = parse_slot(values[i])
      if holder == job then
        redis.call("PEXPIRE", KEYS[at + i], ttl)
        if found == 0 then
          found = tonumber(token)
        end
        break
      end
    end
  end
end
return found
