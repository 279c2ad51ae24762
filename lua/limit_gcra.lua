-- A GCRA limiter on one key (shared/_gcra.lua). KEYS[1]: the limiter's key. ARGV: emission
-- interval ms (per / rate), burst tolerance ms ((burst - 1) * interval), n. Admits n at once
-- when all n fit. Returns {admitted (1/0), remaining (how many more would be admitted now),
-- retry after us (0 when admitted)}.
-- #include "shared/_gcra.lua"
local t = redis.call("TIME")
local now = t[1] * 1000 + t[2] / 1000
local interval, tolerance, n = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0
local tat, fit = gcra_fit(KEYS[1], now, interval, tolerance, n)
if fit < n then
  local late = (tat + (n - 1) * interval - now - tolerance) * 1000
  return {0, fit, late - late % 1 + 1}
end
tat = gcra_take(KEYS[1], tat, now, interval, n)
local left = (tolerance - (tat - now)) / interval + 1
return {1, left < 1 and 0 or left - left % 1, 0}
