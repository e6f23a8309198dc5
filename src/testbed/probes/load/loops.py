"""The event loop a load process runs on: uvloop where installed (less CPU per request),
asyncio's own otherwise. Used only at the edges (a CLI command, a load child process)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_fast(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on uvloop when it is available."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def loop_name() -> str:
    """The running loop's kind, for the summary (``uvloop`` or ``asyncio``)."""
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
