-- Fails on line 7 of this file, after a partial and the generated metadata line.
-- #include "shared/_checks.lua"
-- #include "shared/_debug.lua"
log_debug("about to fail")
local answer = 42

error("main failed with " .. answer)
