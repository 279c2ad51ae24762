-- Claim up to ARGV[1] ready jobs under a lease of ARGV[2] ms (due delayed jobs promoted as
-- shared/_queue_claim.lua says). KEYS: the queue's worker keys (10). Returns the claim reply.
-- #include "shared/_queue_claim.lua"
return claim(ARGV[1], ARGV[2])
