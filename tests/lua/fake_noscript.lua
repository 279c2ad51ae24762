-- Counts its runs in KEYS[1], then fails with a NOSCRIPT-looking error chosen by ARGV[1].
redis.call("INCR", KEYS[1])
if ARGV[1] == "raise" then
  error("NOSCRIPT No matching script.")
elseif ARGV[1] == "table" then
  error({ err = "NOSCRIPT No matching script." })
end
return redis.error_reply("NOSCRIPT fake")
