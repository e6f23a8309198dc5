"""Waiting for a server to become ready: poll its readiness URL until 200, it dies, or time
runs out."""

from __future__ import annotations

import asyncio
import contextlib

from testbed.core.clock import monotonic_ns


async def http_status(host: str, port: int, path: str, timeout_s: float = 2.0) -> int | None:
    """The status code of ``GET path``, or None when nothing answers."""
    status, _ = await http_get(host, port, path, timeout_s, body=False)
    return status


async def http_get(
    host: str, port: int, path: str, timeout_s: float = 2.0, *, body: bool = True
) -> tuple[int | None, bytes]:
    """``GET path`` with ``Connection: close``: the status and (when asked) the body."""
    writer = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            writer.write(request.encode())
            await writer.drain()
            content = await reader.read(1 << 16) if body else await reader.readline()
        head, _, rest = content.partition(b"\r\n\r\n")
        parts = head.split(b"\r\n", 1)[0].split()
        status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None
        return status, rest
    except (OSError, TimeoutError, ValueError):
        return None, b""
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
            async with asyncio.timeout(delay):
                await asyncio.shield(exited)
        delay = min(delay * 1.5, 0.5)
