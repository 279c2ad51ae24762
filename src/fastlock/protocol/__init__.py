"""Sans-IO protocol: RESP encoding and reading, argument rules, reply classification, key slots.

No socket, clock, thread or sleep here: the transports (:mod:`fastlock.sync`) drive it."""
