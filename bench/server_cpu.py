"""Server CPU per lifecycle: ``python bench/server_cpu.py [--ops N]``.

Each fastlock workload is recorded once (:mod:`fastlock.tools.floor`) and replayed from C
against a private server (unix socket, not pinned unless ``--cpu``); the server's own
counters give its cost per operation: ``used_cpu_user`` + ``used_cpu_sys`` of ``INFO cpu``
(process CPU, tick-sampled: use thousands of operations), and the time inside EVALSHA
from ``INFO commandstats`` (the commands its scripts call included). The replay's
untimed prefix (set-up, 10 warm-up operations) is counted too: ``--ops`` 2000 makes it <1%.
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from pathlib import Path

from fastlock import Client
from fastlock.testing.servers import TempServer
from fastlock.tools import floor
from fastlock.tools.workloads import ALL

_STAT = re.compile(r"^cmdstat_(\w+):calls=(\d+),usec=(\d+)", re.M)


def _cpu(client: Client) -> float:
    info = client.execute("INFO", "cpu").decode()
    user = float(info.partition("used_cpu_user:")[2].split()[0])
    system = float(info.partition("used_cpu_sys:")[2].split()[0])
    return user + system


def _commandstats(client: Client) -> dict[str, tuple[int, int]]:
    text = client.execute("INFO", "commandstats").decode()
    return {name: (int(calls), int(usec)) for name, calls, usec in _STAT.findall(text)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--cpu", type=int, default=None, help="pin the server and the replay to this CPU")
    options = parser.parse_args()
    server_binary = shutil.which("redis-server") or shutil.which("valkey-server")
    with (
        TempServer(server_binary, cpu=options.cpu) as server,
        tempfile.TemporaryDirectory() as tmp,
        Client(server.unix_url) as admin,
    ):
        binary = floor.build_replay(tmp)
        assert binary is not None, "gcc is needed"
        print(f"server CPU per operation, {options.ops} operations replayed from C ({server_binary})")
        print(f"{'workload':50s} {'CPU us/op':>10s} {'EVALSHA us/op':>14s} {'EVALSHA calls/op':>17s}")
        for workload in ALL:
            if not workload.counted:
                continue
            recording = floor.record(server.unix_url, workload.setup, options.ops)
            path = Path(tmp) / "recording"
            recording.save(path)
            admin.execute("CONFIG", "RESETSTAT")
            before = _cpu(admin)
            floor.replay_c(binary, server.unix_url, path, options.cpu)
            cpu = (_cpu(admin) - before) / options.ops * 1e6
            calls, usec = _commandstats(admin).get("evalsha", (0, 0))
            print(f"{workload.name:50s} {cpu:10.2f} {usec / options.ops:14.2f} {calls / options.ops:17.2f}")


if __name__ == "__main__":
    main()
