-- Return the keys and the arguments as received (declares no metadata: nothing is appended).
return { KEYS, ARGV }
