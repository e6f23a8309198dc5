"""Watch responses: JSON lines over one chunked HTTP/1.1 response.

Events that are queued together are written in one chunk (a burst of a thousand pod
updates is a few writes, not a thousand). The stream ends after ``timeoutSeconds``, when
the client goes away, or when the watch is closed (its type was deleted, the server
stops). With ``allowWatchBookmarks`` an idle stream carries a BOOKMARK with the current
resourceVersion every few seconds, so a client can resume without a 410.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from kubemu.storage.watchers import BOOKMARK, Event, Watch

#: Seconds between bookmarks on an idle stream, and between checks that the client is there.
IDLE_TICK_S = 5.0
#: Default stream length when the client sets no timeoutSeconds (the real server: 30–60 min).
DEFAULT_TIMEOUT_S = 1800.0
#: Most bytes gathered into one chunk before it is written.
CHUNK_BYTES = 1 << 20

Line = Callable[[Event], bytes]


async def stream_events(
    request: web.Request,
    watch: Watch,
    line: Line,
    timeout_s: float | None,
    bookmark: Callable[[], dict[str, Any]] | None,
) -> web.StreamResponse:
    """Serve ``watch`` on ``request`` until it times out, closes, or the client leaves."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    deadline = time.monotonic() + (timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            event = watch.get_nowait() or await watch.next(min(left, IDLE_TICK_S))
            if event is None:
                if watch.closed or request.transport is None or request.transport.is_closing():
                    break
                if bookmark is not None and left > IDLE_TICK_S:
                    await response.write(
                        orjson.dumps({"type": BOOKMARK, "object": bookmark()}) + b"\n"
                    )
                continue
            chunk = [line(event)]
            size = len(chunk[0])
            while size < CHUNK_BYTES and (more := watch.get_nowait()) is not None:
                chunk.append(line(more))
                size += len(chunk[-1])
            await response.write(b"".join(chunk))
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        watch.close()
    with contextlib.suppress(ConnectionResetError, ConnectionError):
        await response.write_eof()
    return response


async def stream_error(request: web.Request, status: dict[str, Any]) -> web.StreamResponse:
    """A watch that fails at once: HTTP 200 and one ERROR event, as the real server answers."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(orjson.dumps({"type": "ERROR", "object": status}) + b"\n")
    await response.write_eof()
    return response
