-- Claims under a rate (included inside a rated call's branch, so that only those create these
-- closures): a rated queue's claim and complete get its rate key (GCRA, shared/_gcra.lua) as
-- an 11th key.
-- #include "shared/_gcra.lua"
local K_RATE = KEYS[11]

-- claim() under the queue's rate (`interval`, `tolerance`: ms, from ARGV): at most as many
-- jobs as fit now, the rate's TAT moved on by those claimed. When none fits, nothing is
-- popped and next_due is when one will.
local function rated_claim(count_arg, lease_ms, interval, tolerance)
  local now = now_ms()
  interval, tolerance = interval + 0, tolerance + 0
  local tat, fit = gcra_fit(K_RATE, now, interval, tolerance, count_arg + 0)
  if fit == 0 then
    return {now, int(now + math.ceil(tat - now - tolerance))}
  end
  local reply = claim(int(fit), lease_ms, now)
  if #reply > 2 then
    gcra_take(K_RATE, tat, now, interval, (#reply - 2) / 2)
  end
  return reply
end
