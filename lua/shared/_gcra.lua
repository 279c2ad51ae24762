-- GCRA (the generic cell rate algorithm) over one key holding the theoretical arrival time
-- (TAT, server clock ms, exact as %.17g) and expiring with it, shared by the limiters and the
-- rated queues. `interval`: ms per admission (per / rate); `tolerance`: ms admitted ahead
-- ((burst - 1) * interval). Two closures, few C calls: the limiter's whole script is these.

-- The TAT at `now` (ms: the stored one, or `now` once it has passed) and how many of up to
-- `n` admissions fit from it (0..n).
local function gcra_fit(key, now, interval, tolerance, n)
  local tat = redis.call("GET", key)
  tat = tat and tat + 0 or now
  if tat < now then
    tat = now
  end
  local fit = (tolerance - (tat - now)) / interval + 1
  if fit >= n then
    return tat, n
  elseif fit < 1 then
    return tat, 0
  end
  return tat, fit - fit % 1
end

-- Take `n` admissions from TAT `tat`: the new TAT written, never rounded down (a float step
-- lost to rounding is taken one ulp further), the key expiring when it is reached.
local function gcra_take(key, tat, now, interval, n)
  local step = n * interval
  local new = tat + step
  if new - tat < step then
    new = new + new * 2.3e-16
  end
  local ttl = new - now
  redis.call("SET", key, new, "PX", ttl < 1 and 1 or ttl - ttl % 1 + (ttl % 1 > 0 and 1 or 0))
  return new
end
