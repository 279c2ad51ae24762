-- Writes one debug line (when the client's debug setting is on) and returns #ARGV.
-- #include "shared/_debug.lua"
log_debug("hello", KEYS[1], 42)
return #ARGV
