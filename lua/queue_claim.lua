-- Claim up to ARGV[1] ready jobs under a lease of ARGV[2] ms (due delayed jobs promoted as
-- shared/_queue_claim.lua says). KEYS: the queue's worker keys (10). Returns the claim reply.
-- #include "shared/_queue_claim.lua"
if ARGV[3] then -- a rated queue's: ARGV[3], ARGV[4] its GCRA interval and tolerance (ms)
  -- #include "shared/_queue_rate.lua"
  return rated_claim(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
end
return claim(ARGV[1], ARGV[2])
