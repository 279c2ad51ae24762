-- The data hash's pin: a field no job id can be (fresh ids are '~' and 24 hex digits, custom
-- ids never start with '~') valued longer than hash-max-listpack-value (64 bytes by
-- default). enqueue_many writes it, so a data hash that holds batches is a hashtable (O(1)
-- per field) instead of a listpack, which every HSET, HMGET and HDEL scans field by field
-- (hash-max-listpack-entries: 512 compiled in, 128 in redis.conf): at batches of 100 the
-- scans were a large share of the server's work (docs/queues.md, Key layout). A single
-- enqueue writes it when it makes ready DATA_PIN_BACKLOG long.
local DATA_PIN, DATA_PIN_BACKLOG = "~", 64
local DATA_PIN_VALUE = "pin: keeps this hash in hashtable encoding (docs/queues.md, Key layout)......"
