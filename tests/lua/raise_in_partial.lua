-- Fails inside the partial: assert_owner raises at shared/_checks.lua:5.
-- #include "shared/_checks.lua"
redis.call("SET", KEYS[1], "someone")
assert_owner(KEYS[1], ARGV[1])
return 1
