-- #include "shared/_lock_slots.lua"
local TRACK, FENCING, WAITING, WAITED = 1, 2, 4, 8

-- Take a free slot of the scope (KEYS[wake], then `limit` slot keys) for `job`.
-- Idempotent: a job that already holds a slot gets its token back.
-- Returns the fencing token (1 when fencing is off), or on conflict
-- {ms until the first holder's slot expires (-1: none expires), holder job ids...}.
-- With WAITING the holders' slots are flagged so that their release wakes a waiter.
local function acquire(wake, limit, scope, job, ttl, flags, max_history)
  local first = wake + 1
  local waited = bit.band(flags, WAITED) ~= 0 and "1" or "0"
  local values
  if limit == 1 then
    local token = bit.band(flags, FENCING) ~= 0 and redis.call("INCR", KEYS[2]) or 1
    local value = token .. ":" .. waited .. ":" .. job
    local old
    if ttl > 0 then
      old = redis.call("SET", KEYS[first], value, "NX", "GET", "PX", ttl)
    else
      old = redis.call("SET", KEYS[first], value, "NX", "GET")
    end
    if not old then
      if bit.band(flags, TRACK) ~= 0 then
        redis.call("ZADD", KEYS[1], 0, scope .. "#" .. limit)
      end
      changelog(max_history, "locked", scope, job, token)
      return token
    end
    values = { old }
  else
    values = read_slots(first, limit)
    local free, held = nil, 0
    for i = 1, limit do
      if values[i] then
        local token, _, holder = parse_slot(values[i])
        if holder == job then
          return tonumber(token)
        end
        held = held + 1
      elseif not free then
        free = i
      end
    end
    if free then
      local token = bit.band(flags, FENCING) ~= 0 and redis.call("INCR", KEYS[2]) or 1
      local value = token .. ":" .. waited .. ":" .. job
      if ttl > 0 then
        redis.call("SET", KEYS[first + free - 1], value, "PX", ttl)
      else
        redis.call("SET", KEYS[first + free - 1], value)
      end
      if held == 0 and bit.band(flags, TRACK) ~= 0 then
        redis.call("ZADD", KEYS[1], 0, scope .. "#" .. limit)
      end
      changelog(max_history, "locked", scope, job, token)
      return token
    end
  end
  local conflict = { -1 }
  for i = 1, limit do
    local token, flag, holder = parse_slot(values[i])
    if holder == job then
      return tonumber(token)
    end
    conflict[i + 1] = holder
    if bit.band(flags, WAITING) ~= 0 then
      local key = KEYS[first + i - 1]
      local ms = redis.call("PTTL", key)
      if ms >= 0 and (conflict[1] < 0 or ms < conflict[1]) then
        conflict[1] = ms
      end
      if flag == "0" then
        redis.call("SET", key, token .. ":1:" .. holder, "KEEPTTL", "XX")
      end
    end
  end
  changelog(max_history, "conflict", scope, job, 0)
  return conflict
end
