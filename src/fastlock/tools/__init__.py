"""The command line, benchmarks and workloads, and what they measure with: cost counters
(:mod:`.costs`), the callgrind runner, the same-bytes floor (never imported by the runtime)."""
