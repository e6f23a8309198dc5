"""The stand-in gateway's data plane: an HTTP reverse proxy that streams answers through.

One :class:`GatewayProxy` per programmed Gateway listens, for each of its listener ports, on
the host port the process-kubelet gave its pod's container port (so ``kubectl port-forward``
to the Gateway's Service, and the Service variables of in-cluster pods, reach it). A request
goes to the first HTTPRoute rule whose path matches (``PathPrefix`` by path segments, or
``Exact``), to one of the rule's backends (by ``weight``; ``timeouts.request`` bounds the
whole answer, a 504 when it runs out before the first byte), and within an InferencePool to the
endpoint the pool's picker chooses for the prompt (the body's ``prompt``, or the text of its
``messages``). The answer is streamed back chunk by chunk as it arrives (server-sent events
stay events); ``x-gateway-destination-endpoint`` (the header GAIE's EPP sets for the proxy)
tells the client which endpoint served it.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
from aiohttp import web

#: The header GAIE's EPP hands the proxy with the chosen endpoint; also on the answer here.
DESTINATION = "x-gateway-destination-endpoint"
_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}
)


class Backend(Protocol):
    def choose(self, prompt: str) -> tuple[str | None, str]:
        """``(host:port, "")`` of the endpoint to send to, or ``(None, why not)``."""
        ...


@dataclass(frozen=True)
class Rule:
    """One HTTPRoute rule as the proxy applies it."""

    match: str  # PathPrefix | Exact
    path: str
    backends: tuple[tuple[float, Backend], ...] = field(default_factory=tuple)
    timeout_s: float | None = None  # the rule's timeouts.request (None: no limit)

    def matches(self, path: str) -> bool:
        if self.match == "Exact":
            return path == self.path
        prefix = self.path.rstrip("/")
        return path == prefix or path.startswith(prefix + "/") or not prefix


def prompt_of(body: bytes) -> str:
    """The text a prefix-aware picker keys on: ``prompt``, or the messages' contents."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    prompt = data.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return " ".join(p for p in prompt if isinstance(p, str))
    parts = []
    for message in data.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
    return " ".join(parts)


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "GatewayError", "code": status}}
    return web.json_response(body, status=status)


class GatewayProxy:
    """Serves one Gateway's listeners (see the module docstring)."""

    def __init__(
        self,
        name: str,
        session: aiohttp.ClientSession,
        rules: Callable[[], Sequence[Rule]],
    ) -> None:
        self.name = name
        self._session = session
        self._rules = rules
        self._runner: web.AppRunner | None = None
        self.bound: dict[int, int] = {}  # listener port -> host port
        self._rng = random.Random()

    async def bind(self, ports: Mapping[int, int]) -> None:
        """Listen on 127.0.0.1 at each listener's host port (again if they changed)."""
        if dict(ports) == self.bound:
            return
        await self.close()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runner = runner
        for host_port in ports.values():
            await web.TCPSite(runner, "127.0.0.1", host_port, reuse_address=True).start()
        self.bound = dict(ports)

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            with contextlib.suppress(Exception):
                await runner.cleanup()
        self.bound = {}

    def _route(self, path: str) -> tuple[Backend | None, float | None]:
        """The backend a request to ``path`` goes to (by weight) and its rule's timeout."""
        for rule in self._rules():
            if rule.matches(path) and rule.backends:
                total = sum(w for w, _ in rule.backends)
                if total <= 0:
                    return None, None
                draw = self._rng.uniform(0, total)
                for weight, backend in rule.backends:
                    draw -= weight
                    if draw <= 0:
                        return backend, rule.timeout_s
                return rule.backends[-1][1], rule.timeout_s
        return None, None

    @staticmethod
    def _cut(request: web.Request, answer: web.StreamResponse) -> web.StreamResponse:
        """Mid-stream failure: close the client's connection, so it sees the stream cut (as
        behind a real proxy), without an error for the emulator's log."""
        if request.transport is not None:
            request.transport.close()
        return answer

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        backend, timeout_s = self._route(request.path)
        if backend is None:
            return _error(404, f"Gateway {self.name}: no HTTPRoute rule matches {request.path}")
        body = await request.read()
        address, why = backend.choose(prompt_of(body) if body else "")
        if address is None:
            return _error(503, why)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        headers[DESTINATION] = address
        url = f"http://{address}{request.path_qs}"
        answer = web.StreamResponse()
        try:
            async with self._session.request(
                request.method,
                url,
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=5),
            ) as upstream:
                answer.set_status(upstream.status, upstream.reason)
                for key, value in upstream.headers.items():
                    if key.lower() not in _HOP:
                        answer.headers[key] = value
                answer.headers[DESTINATION] = address
                await answer.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await answer.write(chunk)
        except TimeoutError:
            if answer.prepared:
                return self._cut(request, answer)
            return _error(504, f"Gateway {self.name}: upstream {address} exceeded the route's"
                          f" timeouts.request ({timeout_s} s)")  # fmt: skip
        except (aiohttp.ClientError, OSError) as exc:
            if answer.prepared:  # the client left, or the upstream died mid-stream
                return self._cut(request, answer)
            return _error(502, f"Gateway {self.name}: upstream {address} failed: {exc}")
        await answer.write_eof()
        return answer
