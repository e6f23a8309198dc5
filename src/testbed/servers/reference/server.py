"""The reference server's routes and lifetime (``testbed serve hf`` starts it).

Routes: ``/v1/completions``, ``/v1/chat/completions`` (OpenAI), ``/generate``,
``/generate_stream``, ``/info`` (TGI), ``/v1/models``, ``/health``, ``/tokenize``,
``/detokenize``, ``/metrics`` (vLLM's metric names). One line, ``testbed hf listening on
http://HOST:PORT``, is printed (flushed) once the model is loaded and the port is open;
SIGTERM or Ctrl-C stop it cleanly.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from testbed.core.clock import wall_seconds
from testbed.core.errors import ServerStartError
from testbed.servers import models
from testbed.servers.http1 import Request
from testbed.servers.reference import openai, tgi
from testbed.servers.reference.context import BadRequest, ServerContext, UnknownModel
from testbed.servers.reference.engine import Engine, RequestTooLong
from testbed.servers.reference.http import ClientGone, Responder, body_json, start
from testbed.servers.reference.runtime import offline_environment, set_threads
from testbed.servers.reference.settings import ReferenceSettings

_GENERATION_ROUTES = {
    "openai": ("/v1/completions", "/v1/chat/completions"),
    "tgi": ("/generate", "/generate_stream"),
}


class Routes:
    """Maps a request to its handler and every failure to the protocol's error shape."""

    def __init__(
        self, ctx: ServerContext, folder: str, protocols: tuple[str, ...] = ("openai", "tgi")
    ) -> None:
        self.ctx = ctx
        self.folder = folder
        # generation routes of the HTTP protocols not served answer 404
        self.hidden = {
            path
            for protocol, paths in _GENERATION_ROUTES.items()
            if protocol not in protocols
            for path in paths
        }
        self.created = wall_seconds()

    async def __call__(self, request: Request, out: Responder) -> None:
        tgi_route = request.path in ("/generate", "/generate_stream")
        try:
            await self._dispatch(request, out)
        except ClientGone:
            raise
        except Exception as exc:
            if out.status:
                return  # a stream already started: the door cuts it (no [DONE], no last chunk)
            status, kind = _status_of(exc)
            if tgi_route:  # TGI answers validation errors with 422
                kind = "validation" if status == 400 else kind
                body = {"error": str(exc), "error_type": kind}
                out.send_json(422 if status == 400 else status, body)
            else:
                out.send_json(status, _error(str(exc), kind, status))

    async def _dispatch(self, request: Request, out: Responder) -> None:
        ctx, path, method = self.ctx, request.path, request.method
        generating = {  # POST, answered while the engine generates
            "/v1/completions": lambda: openai.handle(ctx, request, out, chat=False),
            "/v1/chat/completions": lambda: openai.handle(ctx, request, out, chat=True),
            "/generate": lambda: tgi.handle(ctx, request, out, stream=False),
            "/generate_stream": lambda: tgi.handle(ctx, request, out, stream=True),
        }
        posts = {
            "/tokenize": lambda: out.send_json(200, self._tokenize(body_json(request))),
            "/detokenize": lambda: out.send_json(200, self._detokenize(body_json(request))),
        }
        gets = {
            "/health": lambda: out.send_text(200, ""),
            "/v1/models": lambda: out.send_json(200, self._models()),
            "/metrics": lambda: out.send_text(
                200, ctx.engine.metrics.render(), "text/plain; version=0.0.4"
            ),
            "/info": lambda: out.send_json(200, self._info()),
        }
        for path_hidden in self.hidden:
            del generating[path_hidden]
        table = posts if method == "POST" else gets if method == "GET" else {}
        if method == "POST" and path in generating:
            await generating[path]()
        elif path in table:
            table[path]()
        elif path in generating or path in posts or path in gets:
            out.send_json(405, _error(f"{method} {path} is not allowed", "MethodNotAllowed", 405))
        else:
            out.send_json(404, _error(f"no route {path}", "NotFoundError", 404))

    def _models(self) -> dict[str, Any]:
        card = {
            "id": self.ctx.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "testbed",
            "root": self.folder,
            "parent": None,
            "max_model_len": self.ctx.max_len,
        }
        return {"object": "list", "data": [card]}

    def _info(self) -> dict[str, Any]:
        return {
            "model_id": self.ctx.model_name,
            "model_dtype": str(self.ctx.engine.loaded.dtype).removeprefix("torch."),
            "max_concurrent_requests": self.ctx.max_batch,
            "max_batch_size": self.ctx.max_batch,
            "max_total_tokens": self.ctx.max_len,
            "row_multiple": self.ctx.engine.loaded.row_multiple,
            "router": "testbed-hf",
        }

    def _tokenize(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        if "messages" in body:
            ids = self.ctx.chat_ids(body["messages"], bool(body.get("add_generation_prompt", True)))
        else:
            ids = self.ctx.prompt_ids(body.get("prompt"))
        return {"tokens": ids, "count": len(ids), "max_model_len": self.ctx.max_len}

    def _detokenize(self, body: Any) -> dict[str, Any]:
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise BadRequest('the body must be {"tokens": [ids…]}')
        return {"prompt": self.ctx.tokenizer.decode(tokens)}


def _error(message: str, kind: str, status: int) -> dict[str, Any]:
    """vLLM's error body."""
    return {"object": "error", "message": message, "type": kind, "code": status}


def _status_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, UnknownModel):
        return 404, "NotFoundError"
    if isinstance(exc, BadRequest | RequestTooLong | ValueError):
        return 400, "BadRequestError"
    return 500, "InternalServerError"


async def _serve(
    ctx: ServerContext,
    folder: str,
    host: str,
    port: int,
    grpc_port: int | None,
    protocols: tuple[str, ...],
) -> None:
    """Serve HTTP on ``port`` and, when ``grpc_port`` is not None, TGIS over gRPC on it."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # gRPC first: once /health answers, every protocol is ready
    grpc = None
    if grpc_port is not None:
        from testbed.servers import grpc_server
        from testbed.servers.reference.tgis import ReferenceServicer

        grpc, grpc_bound = await grpc_server.start(
            ReferenceServicer(ctx), host, grpc_port, "the hf server"
        )
        print(f"testbed hf gRPC (tgis) on {host}:{grpc_bound}", flush=True)
    try:
        door = await start(Routes(ctx, folder, protocols), host, port)
    except OSError as exc:
        raise ServerStartError(
            f"cannot listen on {host}:{port}: {exc}; pick another --port"
        ) from exc
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(ctx.engine.run())
        print(f"testbed hf listening on http://{host}:{door.port}", flush=True)
        await stop.wait()
        door.stop_accepting()
        if grpc is not None:
            await grpc.stop(None)
        ctx.engine.stop()  # the requests in flight end with the engine's shutdown error
        await door.close()


def serve(
    settings: ReferenceSettings, source: str, host: str, port: int, grpc_port: int = 8033
) -> int:
    """Load the model ``source`` names, serve it until SIGTERM or Ctrl-C; the exit code."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The checksum of the weights (or a first conversion) runs while the stacks import.
        resolving = pool.submit(models.resolve_model, source)
        offline_environment()
        set_threads(settings.threads)
        from testbed.servers.reference.served import load_served

        folder = resolving.result()

    name = settings.served_model_name or models.parse_source(source).served_name
    max_batch = settings.max_batch_size or 8
    store = models.models_dir() / "row-multiples.json"
    loaded = load_served(folder, name=name, dtype=settings.dtype, max_batch=max_batch, store=store)
    if not settings.batch_invariant:
        loaded.unpad()
    max_len = min(settings.max_model_len or loaded.max_len, loaded.max_len)
    engine = Engine(loaded, max_batch=max_batch, max_len=max_len, threads=settings.threads)
    aliases = frozenset({source, str(folder)})
    ctx = ServerContext(engine, name, aliases, max_len, max_batch)
    sys.stderr.write(
        f"testbed hf: {folder} ({loaded.kind}) as {name!r}, dtype {settings.dtype},"
        f" {settings.threads} thread(s),"
        f" max batch {max_batch}, max length {max_len}, row multiple {loaded.row_multiple}\n"
    )
    grpc = grpc_port if "tgis" in settings.protocols else None
    asyncio.run(_serve(ctx, str(folder), host, port, grpc, tuple(settings.protocols)))
    return 0
