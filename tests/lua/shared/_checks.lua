-- Helpers of the error-mapping tests; the line numbers below are asserted.
local function assert_owner(key, token)
  local owner = redis.call("GET", key)
  if owner ~= token then
    error("owner mismatch: " .. tostring(owner))
  end
end

local function push(key, value)
  return redis.call("LPUSH", key, value)
end
