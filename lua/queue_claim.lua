-- Claim up to ARGV[1] ready jobs under a lease of ARGV[2] ms, promoting up to ARGV[3] due
-- delayed jobs first. KEYS: the queue's worker keys (10). Returns the claim reply (shared/_queue_claim.lua).
-- #include "shared/_queue_claim.lua"
return claim(ARGV[1], ARGV[2], ARGV[3])
