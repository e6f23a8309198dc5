"""The streamed response's per-read path, compiled (``_readpath.c``)."""

from collections.abc import Callable
from typing import Any

from testbed.clients.response import Response

class ChunkReader:
    def data_received(self, data: bytes) -> None: ...

class EventReader:
    def on_data(self, data: bytes, t_ns: int) -> None: ...

class ChoicesDecoder:
    fallback: Callable[[Response, Any, int], None]
    def __init__(self, fallback: Callable[[Response, Any, int], None], /) -> None: ...
    def __call__(self, response: Response, obj: Any, t_ns: int, /) -> None: ...

def configure(chunk_size_state: int, /) -> None: ...
