"""Helpers for testing code that uses fastlock against a real server, never imported by the
runtime: :mod:`~fastlock.testing.servers` (``TempServer``, a private throw-away server, and
``ExternalServer``), :mod:`~fastlock.testing.proxy` (``TcpProxy``, a fault-injecting proxy),
:mod:`~fastlock.testing.raw` (raw RESP over sockets) and :mod:`~fastlock.testing.tls` (test
certificates). Server commands and round trips per operation: :mod:`fastlock.tools.costs`."""
