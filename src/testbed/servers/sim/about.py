"""The simulator's routes that generate nothing: what it says about itself and its tokenizer.

``POST /tokenize`` (vLLM's shape, or TGI's list of tokens for ``inputs``), ``GET /v1/models``
(the served model, then each further one with it as parent, as vLLM lists its LoRA
adapters), ``GET /health`` (503 during ``slow_start_s``), ``GET /metrics`` (vLLM's names) and
``GET /info`` (TGI's). Each answers at once in one write, outside admission and faults: a
client's probing never waits for a generation slot.
"""

from __future__ import annotations

import json
from typing import Protocol

from testbed.config.sim import SimParams
from testbed.core.clock import wall_seconds
from testbed.servers.http1 import Connection, Request
from testbed.servers.sim.dialect import BadRequest, GenerationRequest, load_json
from testbed.servers.sim.metrics import SimMetrics
from testbed.servers.sim.openai import chat_prompt, chat_prompt_tokens, content_text
from testbed.servers.sim.text import count_tokens, tokenize

#: The context length the simulator reports when ``max_model_len`` is not set.
DEFAULT_MAX_MODEL_LEN = 8192


class Server(Protocol):
    """What these routes read of the server (``app.SimApp`` is one): stated here, so that
    this module does not import the app that routes to it."""

    params: SimParams
    metrics: SimMetrics

    @property
    def ready(self) -> bool: ...


def max_model_len(params: SimParams) -> int:
    """The context length the simulator reports (over HTTP and gRPC alike)."""
    return params.max_model_len or DEFAULT_MAX_MODEL_LEN


def tokenize_route(server: Server, request: Request, conn: Connection) -> None:
    params = server.params
    try:
        data = load_json(request.body)
        if "inputs" in data:  # TGI's shape: a list of tokens with offsets
            text = data["inputs"]
            if not isinstance(text, str):
                raise BadRequest("'inputs' must be a string", "inputs")
            ids = tokenize(text, params)
            conn.respond(200, json.dumps([{"id": i} for i in ids]).encode())
            return
        if "messages" in data:
            chat_prompt(data["messages"])  # validates
            ids = [
                token
                for m in data["messages"]
                for token in tokenize(content_text(m.get("content")), params)
            ]
            count = chat_prompt_tokens(data["messages"], params)
        else:
            text = data.get("prompt")
            if not isinstance(text, str):
                raise BadRequest("'prompt' (or 'messages') must be given", "prompt")
            ids = tokenize(text, params)
            count = count_tokens(text, params.tokenizer)
    except BadRequest as exc:
        conn.respond(exc.status, GenerationRequest.error_body(exc.status, exc.message))
        return
    body = {"count": count, "max_model_len": max_model_len(params), "tokens": ids}
    conn.respond(200, json.dumps(body).encode())


def models_route(server: Server, request: Request, conn: Connection) -> None:
    params = server.params
    base = params.model_name
    cards = [
        {
            "id": name,
            "object": "model",
            "created": wall_seconds(),
            "owned_by": "testbed-sim",
            "root": name,
            "parent": None if name == base else base,
            "max_model_len": max_model_len(params),
        }
        for name in (base, *params.models)
    ]
    conn.respond(200, json.dumps({"object": "list", "data": cards}).encode())


def health_route(server: Server, request: Request, conn: Connection) -> None:
    if server.ready:
        conn.respond(200, b"")
    else:
        conn.respond(503, b'{"status":"starting"}')


def metrics_route(server: Server, request: Request, conn: Connection) -> None:
    body = server.metrics.render().encode()
    conn.respond(200, body, b"text/plain; version=0.0.4; charset=utf-8")


def info_route(server: Server, request: Request, conn: Connection) -> None:
    p = server.params
    info = {
        "model_id": p.model_name,
        "model_dtype": p.dtype,
        "max_input_tokens": max_model_len(p) - 1,
        "max_total_tokens": max_model_len(p),
        "max_concurrent_requests": p.effective_concurrency,
        "version": "testbed-sim",
    }
    conn.respond(200, json.dumps(info).encode())
