"""Print the commands and round trips of each lock lifecycle as Markdown (for docs/locks.md).

    python bench/lifecycle_table.py [--url URL] [--operations N]

Without ``--url`` a private server is started (``fastlock.testing.servers.TempServer``); with
one, use a server nobody else talks to (statistics are reset).
"""

from __future__ import annotations

import argparse
import contextlib

import fastlock
from fastlock.testing.servers import TempServer
from fastlock.tools.costs import measure_lifecycles, measure_options


def tables(client: fastlock.Client, operations: int) -> str:
    off = measure_lifecycles(client, operations=operations)
    on = measure_lifecycles(client, max_history=1000, operations=operations)
    lines = [
        "| lock type | commands | round trips | commands, changelog on | round trips, changelog on |",
        "|---|---|---|---|---|",
    ]
    for kind, cost in off.items():
        lines.append(
            f"| {kind.value} | {cost.commands_per_op:g} | {cost.round_trips_per_op:g} "
            f"| {on[kind].commands_per_op:g} | {on[kind].round_trips_per_op:g} |"
        )
    lines += ["", "| until_executed with | commands | round trips | by command |", "|---|---|---|---|"]
    for label, cost in measure_options(client, operations).items():
        by_command = ", ".join(
            f"{name} {calls / cost.operations:g}" for name, calls in sorted(cost.by_command.items())
        )
        lines.append(f"| {label} | {cost.commands_per_op:g} | {cost.round_trips_per_op:g} | {by_command} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="server URL (default: start a private server)")
    parser.add_argument("--operations", type=int, default=200, help="lifecycles per figure")
    options = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = options.url or stack.enter_context(TempServer()).unix_url
        client = stack.enter_context(fastlock.Client(url))
        version = client.execute("INFO", "server").decode().partition("redis_version:")[2].split()[0]
        print(f"<!-- bench/lifecycle_table.py, {options.operations} lifecycles, server {version} -->")
        print(tables(client, options.operations))


if __name__ == "__main__":
    main()
