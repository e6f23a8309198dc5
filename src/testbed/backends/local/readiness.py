"""Waiting for a server to become ready: poll its readiness URL until 200, it dies, or time
runs out."""

from __future__ import annotations

import asyncio
import contextlib

from testbed.core.clock import monotonic_ns


async def http_status(host: str, port: int, path: str, timeout_s: float = 2.0) -> int | None:
    """The status code of ``GET path``, or None when nothing answers."""
    writer = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
            )
            await writer.drain()
            line = await reader.readline()
        parts = line.split()
        return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None
    except (OSError, TimeoutError, ValueError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def wait_ready(
    host: str,
    port: int,
    path: str,
    timeout_s: float,
    exited: asyncio.Future[int] | asyncio.Task[int],
) -> str | None:
    """None once ready; otherwise why not ("exited with code 1", "not ready after 300 s")."""
    deadline = monotonic_ns() + int(timeout_s * 1e9)
    delay = 0.02
    while True:
        if exited.done():
            return f"exited with code {exited.result()} before becoming ready"
        if await http_status(host, port, path) == 200:
            return None
        if monotonic_ns() >= deadline:
            return f"not ready after {timeout_s:g} s (GET {path} never answered 200)"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(exited), delay)
        delay = min(delay * 1.5, 0.5)
