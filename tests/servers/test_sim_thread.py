"""The simulator in a background thread: a failure there is reported, never swallowed."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from testbed.config.sim import SimParams
from testbed.core.errors import ServerCrashed
from testbed.servers.http1 import Connection
from testbed.servers.sim import SimServer, serve_in_thread


def _hit(url: str) -> None:
    """One request; the broken server closes the connection instead of answering."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        while sock.recv(4096):
            pass


def test_a_callback_error_in_the_thread_is_raised_when_the_block_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: Connection, data: bytes) -> None:
        raise ValueError("parser bug")

    monkeypatch.setattr(Connection, "data_received", broken)
    with (
        pytest.raises(ServerCrashed, match=r"thread failed .*ValueError: parser bug"),
        serve_in_thread(SimParams()) as url,
    ):
        _hit(url)


def test_an_error_while_stopping_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    real = SimServer.stop

    async def stop(self: SimServer) -> Any:
        await real(self)
        raise RuntimeError("could not close")

    monkeypatch.setattr(SimServer, "stop", stop)
    with (
        pytest.raises(ServerCrashed, match="RuntimeError: could not close"),
        serve_in_thread(SimParams()),
    ):
        pass


def test_a_clean_serve_raises_nothing() -> None:
    with serve_in_thread(SimParams()) as url:
        _hit(url)
