-- INCR KEYS[1] and return the new value.
return redis.call("INCR", KEYS[1])
