"""A tiny scripted HTTP server for the client tests: OpenAI and TGI shapes, streamed with
chunked encoding, with optional delays and faults. Not the simulator: just enough to make
the client meet real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class FakeServer:
    port: int = 0
    tokens: int = 8
    ttft_s: float = 0.0
    itl_s: float = 0.0
    fault: str = ""  # "", "500", "close_mid_stream", "close_after_response"
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers_seen: list[dict[str, str]] = field(default_factory=list)
    connections: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, path, _ = lines[0].split(" ")
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                self.headers_seen.append(headers)
                length = int(headers.get("content-length", "0"))
                body = json.loads(await reader.readexactly(length)) if length else {}
                self.requests.append({"method": method, "path": path, "body": body})
                await self.respond(path, body, writer)
                if self.fault.startswith("close"):
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def respond(self, path: str, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        if path == "/v1/models":
            await self.send_json(writer, {"data": [{"id": "fake-model", "object": "model"}]})
            return
        if self.fault == "500":
            await self.send_json(writer, {"error": "boom"}, status=500)
            return
        n = int(body.get("max_tokens") or body.get("parameters", {}).get("max_new_tokens") or 0)
        n = n or self.tokens
        words = [f" w{i}" for i in range(n)]
        stream = bool(body.get("stream"))
        tgi = path.startswith("/generate")
        if not stream:
            if tgi:
                obj: dict[str, Any] = {
                    "generated_text": "".join(words),
                    "details": {"finish_reason": "length", "generated_tokens": n},
                }
            else:
                obj = {
                    "choices": [{"text": "".join(words), "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": n},
                }
            await asyncio.sleep(self.ttft_s)
            await self.send_json(writer, obj)
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        events = [self.event(path, w, i, n) for i, w in enumerate(words)]
        if not tgi:
            events.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}})
        await asyncio.sleep(self.ttft_s)
        for i, event in enumerate(events):
            if self.fault == "close_mid_stream" and i == n // 2:
                writer.transport.abort()
                return
            data = b"data: " + json.dumps(event).encode() + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            if self.itl_s and i < len(events) - 1:
                await writer.drain()
                await asyncio.sleep(self.itl_s)
        if not tgi:
            data = b"data: [DONE]\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    @staticmethod
    def event(path: str, word: str, i: int, n: int) -> dict[str, Any]:
        last = i == n - 1
        if path.startswith("/generate"):
            return {
                "token": {"id": i, "text": word, "special": False},
                "generated_text": None,
                "details": {"finish_reason": "length", "generated_tokens": n} if last else None,
            }
        reason = "length" if last else None
        if path == "/v1/chat/completions":
            return {"choices": [{"delta": {"content": word}, "finish_reason": reason}]}
        return {"choices": [{"text": word, "finish_reason": reason}]}

    @staticmethod
    async def send_json(writer: asyncio.StreamWriter, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        writer.write(
            b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (status, len(data), data)
        )
        await writer.drain()


@contextlib.asynccontextmanager
async def serve_fake(**options: Any) -> AsyncIterator[FakeServer]:
    """A running fake server on a free loopback port (tests run it inside asyncio.run)."""
    fake = FakeServer(**options)
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = server.sockets[0].getsockname()[1]
    async with server:
        yield fake
        server.close()


@pytest.fixture
def fake() -> Any:
    """The ``serve_fake`` factory, as a fixture (tests/ is not a package)."""
    return serve_fake
