"""A throw-away Sentinel deployment: a master, one replica and three sentinels on 127.0.0.1.

``with TempSentinels() as s: SentinelClient(s.sentinels, s.service)``. The sentinels use
``down-after-milliseconds 500`` (``down_after``: a longer one spares a loaded machine the
failovers of a master slow to answer a PING) and ``failover-timeout 2000``; :meth:`TempSentinels.failover`
runs ``SENTINEL FAILOVER`` and returns when the replica is the master and when the sentinels
announced it; :meth:`TempSentinels.kill_master` SIGKILLs the master and returns when the
sentinels announced its replica; :meth:`TempSentinels.kill_sentinel` SIGKILLs one sentinel
(the others go on: quorum 2 of 3). :meth:`TempSentinels.rejoin` makes a deposed master a
replica at once (the sentinels would, some 8 s after the failover) and
:meth:`TempSentinels.revive` brings a killed one back so, both waiting until it is synced.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .cluster import _info, wait_until
from .raw import ServerError, raw_command
from .servers import HOST, TempServer, _die_with_parent, find_server_binary, free_port

__all__ = ["TempSentinels"]

SERVICE = "fastlock"


class TempSentinels:
    """A master and a replica (TempServers) watched by three sentinels, quorum 2."""

    def __init__(
        self,
        binary: str | None = None,
        flavour: str | None = None,
        service: str = SERVICE,
        down_after: int = 500,
    ) -> None:
        self.binary = binary or find_server_binary()
        self.service, self.down_after = service, down_after
        self.master = TempServer(self.binary, flavour, extra_args=("--repl-diskless-sync-delay", "0"))
        self.replica = TempServer(self.binary, flavour, extra_args=("--repl-diskless-sync-delay", "0"))
        self.flavour = self.master.flavour
        self.ports: list[int] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._killed: set[int] = set()
        self._dir: Path | None = None

    @property
    def sentinels(self) -> list[str]:
        """The sentinels' ``host:port``."""
        return [f"{HOST}:{port}" for port in self.ports]

    def start(self) -> TempSentinels:
        try:
            self.master.start()
            self.replica.start()
            self.replica.raw_command("REPLICAOF", HOST, self.master.port)
            wait_until(
                lambda: b"master_link_status:up" in self.replica.raw_command("INFO", "replication"),
                10,
                "synced",
            )
            self._dir = Path(tempfile.mkdtemp(prefix="fastlock-sentinel-"))
            for n in range(3):
                self._start_sentinel(n)
            for port in self.ports:  # (hellos every 2 s, INFO of the master every 10 s: a missed
                # first INFO is seen 10 s later, past a 10 s bound on a loaded machine)
                wait_until(functools.partial(self._sees_replica, port), 30, "watching")
        except BaseException:
            self.stop()
            raise
        return self

    def _start_sentinel(self, n: int) -> None:
        assert self._dir is not None
        port = free_port()
        conf = self._dir / f"sentinel-{n}.conf"
        conf.write_text(
            f"port {port}\nbind {HOST}\ndir {self._dir}\nlogfile {self._dir}/sentinel-{n}.log\n"
            f"sentinel monitor {self.service} {HOST} {self.master.port} 2\n"
            f"sentinel down-after-milliseconds {self.service} {self.down_after}\n"
            f"sentinel failover-timeout {self.service} 2000\n"
            f"sentinel parallel-syncs {self.service} 1\n"
        )
        self._procs.append(
            subprocess.Popen(
                [self.binary, str(conf), "--sentinel"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        )
        self.ports.append(port)

    def _sees_replica(self, port: int) -> bool:
        """The sentinel knows the two others and the replica (the ~2 s hello period)."""
        reply = raw_command((HOST, port), "SENTINEL", "MASTER", self.service)
        return b"num-other-sentinels\r\n$1\r\n2\r\n" in reply and b"num-slaves\r\n$1\r\n1\r\n" in reply

    @property
    def live(self) -> list[int]:
        """The ports of the sentinels not killed."""
        return [port for port in self.ports if port not in self._killed]

    def master_port(self) -> int:
        """The master's port as the first live sentinel reports it."""
        reply = raw_command((HOST, self.live[0]), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        return int(reply.split(b"\r\n")[-2])

    def current(self) -> tuple[TempServer, TempServer]:
        """The master and the replica, as the sentinels name them."""
        if self.master_port() == self.master.port:
            return self.master, self.replica
        return self.replica, self.master

    def failover(self, timeout: float = 30) -> tuple[TempServer, float, float]:
        """``SENTINEL FAILOVER`` (asked again while a sentinel answers ``-INPROG`` or
        ``-NOGOODSLAVE``, for ``timeout`` seconds): the new master, when it became writable
        (monotonic) and when the first live sentinel reported it."""
        new = self.current()[1]
        replies: list[bytes] = []

        def accepted() -> bool:
            replies.append(raw_command((HOST, self.live[0]), "SENTINEL", "FAILOVER", self.service))
            return replies[-1] == b"+OK\r\n"

        try:
            wait_until(accepted, timeout, "accepted", step=0.1)
        except ServerError:
            raise ServerError(f"SENTINEL FAILOVER: {replies[-1:]!r}") from None
        wait_until(
            lambda: b"role:master" in new.raw_command("INFO", "replication"), timeout, "promoted", step=0.002
        )
        writable = time.monotonic()
        wait_until(lambda: self.master_port() == new.port, timeout, "announced", step=0.002)
        announced = time.monotonic()
        return new, writable, announced

    def kill_master(self, timeout: float = 60) -> TempServer:
        """SIGKILL the master; return its replica once the sentinels announce it."""
        old, new = self.current()
        old.kill()
        self.wait_announced(new, timeout)
        return new

    def wait_announced(self, server: TempServer, timeout: float = 60) -> None:
        """Wait until the first live sentinel names ``server`` the master."""
        wait_until(lambda: self.master_port() == server.port, timeout, "failed over", step=0.01)

    def wait_synced(self, timeout: float = 15) -> None:
        """Wait until every live sentinel names the same master and the replica has all its
        writes (its link up, its offset at the master's)."""

        def synced() -> bool:
            master, replica = self.current()
            named = {
                raw_command((HOST, port), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
                for port in self.live
            }
            mine, theirs = _info(master, "replication"), _info(replica, "replication")
            return (
                len(named) == 1
                and mine["role"] == "master"
                and theirs.get("master_port") == str(master.port)
                and theirs.get("master_link_status") == "up"
                and int(theirs["slave_repl_offset"]) >= int(mine["master_repl_offset"])
            )

        wait_until(synced, timeout, "synced")

    def rejoin(self, server: TempServer, timeout: float | None = 15) -> None:
        """Make ``server`` (a deposed master) a replica of the master the sentinels name, its
        writes since the failover dropped; wait until synced (unless ``timeout`` is None)."""
        master = self.current()[0]
        reply = server.raw_command("REPLICAOF", HOST, master.port)
        if reply != b"+OK\r\n":
            raise ServerError(f"REPLICAOF failed: {reply!r}")
        if timeout is not None:
            self.wait_synced(timeout)

    def revive(self, server: TempServer, timeout: float = 15) -> None:
        """Start a killed ``server`` again, empty, and make it the replica (:meth:`rejoin`)."""
        server.restart()
        self.rejoin(server, timeout)

    def kill_sentinel(self, port: int) -> None:
        """SIGKILL the sentinel on ``port``."""
        proc = self._procs[self.ports.index(port)]
        proc.kill()
        proc.wait()
        self._killed.add(port)

    def stop(self) -> None:
        for proc in self._procs:
            proc.kill()
            proc.wait()
        self._procs.clear()
        self.master.stop()
        self.replica.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> TempSentinels:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
