"""The command line, benchmarks and workloads (never imported by the runtime)."""
