-- The server refuses the LPUSH at shared/_checks.lua:10 (the key holds a string).
-- #include "shared/_checks.lua"
redis.call("SET", KEYS[1], "a string")
return push(KEYS[1], "x")
