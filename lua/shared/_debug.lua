-- Debug lines for any script: log_debug(...) writes "fastlock <script>: <values>" to the
-- server log (NOTICE level, shown by the default loglevel) when the client's debug setting
-- is on, and costs one boolean test when it is off.
-- #meta debug script_name
local function log_debug(...)
  if META.debug then
    local parts = { ... }
    for i = 1, select("#", ...) do
      parts[i] = tostring(parts[i])
    end
    redis.log(redis.LOG_NOTICE, "fastlock " .. META.script_name .. ": " .. table.concat(parts, " "))
  end
end
