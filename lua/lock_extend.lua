-- Reset the expiry of the slots a job holds to ttl_ms (see shared/_lock_slots.lua for KEYS).
-- KEYS: index, counter, changelog, then per scope (one, or the runtime then the queue-time
--       scope of until_and_while_executing) its wake list and slot 1..limit
-- ARGV: job_id, ttl_ms, limit
-- Returns the fencing token of the first scope's slot the job holds, or 0 when it holds
-- nothing (expired or released).
-- #include "shared/_lock_slots.lua"

local limit, found = tonumber(ARGV[3]), 0
for wake = 4, #KEYS, limit + 1 do
  local values = read_slots(wake + 1, limit)
  for i = 1, limit do
    if values[i] then
      local token, _, holder = parse_slot(values[i])
      if holder == ARGV[1] then
        redis.call("PEXPIRE", KEYS[wake + i], ARGV[2])
        if found == 0 then
          found = tonumber(token)
        end
        break
      end
    end
  end
end
return found
