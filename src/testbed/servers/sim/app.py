"""The simulator application: routes, admission (max concurrency and a waiting queue), faults.

Routes: OpenAI ``/v1/completions``, ``/v1/chat/completions``, ``/v1/responses``
(:mod:`.responses`), ``/v1/embeddings`` (:mod:`.embeddings`); TGI ``/generate``,
``/generate_stream``; and those that generate nothing (:mod:`.about`): ``/v1/models``,
``/info``, ``/tokenize``, ``/health``, ``/metrics``. The
OpenAI routes and ``/tokenize`` move under ``openai_prefix`` when one is given (KServe's
``/openai/v1/…``).
Everything runs on one event loop thread, so state is plain attributes.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import sys
from collections import deque
from collections.abc import Callable

from testbed.config.sim import SimParams
from testbed.core.clock import wall_seconds
from testbed.servers.http1 import REQUEST_ID, Connection, Request
from testbed.servers.sim import about, embeddings
from testbed.servers.sim.delivery import Delivery
from testbed.servers.sim.dialect import BadRequest, GenerationRequest
from testbed.servers.sim.faults import FaultInjector
from testbed.servers.sim.kvcache import KvCache, block_hashes, pieces_of
from testbed.servers.sim.latency import LatencyModel
from testbed.servers.sim.metrics import SimMetrics
from testbed.servers.sim.openai import ChatRequest, CompletionRequest
from testbed.servers.sim.pacing import Pacer
from testbed.servers.sim.responses import ResponsesRequest
from testbed.servers.sim.text import Generation, generate
from testbed.servers.sim.tgi import TgiRequest

_Route = Callable[[Request, Connection], None]

#: Seconds before a token deadline within which a new request waits until the write is done.
ARRIVAL_GUARD = 300e-6


class SimApp:
    """The simulator's state and request handling, bound to one event loop."""

    def __init__(self, params: SimParams, loop: asyncio.AbstractEventLoop) -> None:
        self.params = params
        self.loop = loop
        self.metrics = SimMetrics(params.model_name, params.not_played)
        self.latency = LatencyModel(params)
        #: the further served models' latency (each its own seeded draws)
        self._latencies = {name: LatencyModel(params.for_model(name)) for name in params.models}
        self.pacer = Pacer(loop)
        self.connections: set[Connection] = set()
        self.closing = False  # set by SimServer.stop(): late connections are reset
        self._faults = FaultInjector(params.faults, params.seed)
        self._limit = params.effective_concurrency
        self._max_waiting = params.max_waiting
        self._queue: deque[Delivery] = deque()
        self._ready_at = loop.time() + params.faults.slow_start_s
        self._ids = itertools.count(1)
        self._kv = (
            KvCache(params.kv_cache_tokens, params.block_size)
            if params.kv_cache_tokens is not None
            else None
        )
        self.metrics.kv = self._kv
        self._instant = params.instant and self._kv is None
        # OpenAI's routes (and /tokenize, which clients find beside them) may live under a
        # prefix, as KServe's model server serves them under /openai.
        openai = params.openai_prefix
        self._routes: dict[tuple[str, str], _Route] = {
            ("POST", f"{openai}/v1/completions"): functools.partial(
                self._serve, CompletionRequest, False
            ),
            ("POST", f"{openai}/v1/chat/completions"): functools.partial(
                self._serve, ChatRequest, False
            ),
            ("POST", f"{openai}/v1/responses"): functools.partial(
                self._serve, ResponsesRequest, False
            ),
            ("POST", f"{openai}/v1/embeddings"): functools.partial(embeddings.serve, self),
            ("POST", "/generate"): functools.partial(self._serve, TgiRequest, False),
            ("POST", "/generate_stream"): functools.partial(self._serve, TgiRequest, True),
            ("POST", f"{openai}/tokenize"): functools.partial(about.tokenize_route, self),
            ("GET", f"{openai}/v1/models"): functools.partial(about.models_route, self),
            ("GET", "/health"): functools.partial(about.health_route, self),
            ("GET", "/metrics"): functools.partial(about.metrics_route, self),
            ("GET", "/info"): functools.partial(about.info_route, self),
        }
        # Generation routes of a protocol the simulator was not asked to serve answer 404.
        served = {"openai": (f"{openai}/v1/completions", f"{openai}/v1/chat/completions",
                             f"{openai}/v1/responses", f"{openai}/v1/embeddings"),
                  "tgi": ("/generate", "/generate_stream")}  # fmt: skip
        for protocol, paths in served.items():
            if protocol not in params.protocols:
                for path in paths:
                    del self._routes[("POST", path)]
        self._paths = {path for _, path in self._routes}

    # -- entry point from the HTTP layer
    def log_request(self, request_id: str | None, method: str, path: str) -> None:
        """The request's line in the server's log (``log_requests``): what a client's record
        joins by its request id. Buffered: written with the next block or at exit."""
        sys.stdout.write(f"request {request_id or '-'} {method} {path}\n")

    def handle(self, request: Request, conn: Connection) -> None:
        """Route a request, after any token write due in the next moments.

        Parsing a generation request costs tens of microseconds; done just before a deadline,
        it would make that token late. Its own timing is unaffected by the wait: its deadlines
        count from ``request.arrival``.
        """
        due = self.pacer.next_due()
        if due is not None and due - self.pacer.lead - self.loop.time() < ARRIVAL_GUARD:
            self.pacer.at(due, functools.partial(self._dispatch, request, conn))
        else:
            self._dispatch(request, conn)

    def _dispatch(self, request: Request, conn: Connection) -> None:
        if not conn.open:
            return  # the client left while its request waited for a due write
        if self.params.log_requests:
            self.log_request(request.headers.get(REQUEST_ID), request.method, request.path)
        route = self._routes.get((request.method, request.path))
        if route is not None:
            route(request, conn)
        elif request.path in self._paths:
            conn.respond(405, GenerationRequest.error_body(405, "method not allowed"))
        else:
            message = f"no route {request.method} {request.path}"
            conn.respond(404, GenerationRequest.error_body(404, message))

    def serve(
        self, dialect: type[GenerationRequest], stream: bool, request: Request, conn: Connection
    ) -> None:
        """A generation request from another front door (the gRPC one): ``conn`` need only
        have the HTTP connection's answering methods."""
        self._serve(dialect, stream, request, conn)

    def latency_for(self, model: str | None) -> LatencyModel:
        """The latency model of the served model a request names (the base one when it
        names none)."""
        return self._latencies.get(model or "", self.latency)

    @property
    def ready(self) -> bool:
        return self.loop.time() >= self._ready_at

    # -- generation
    def _serve(
        self, dialect: type[GenerationRequest], stream: bool, request: Request, conn: Connection
    ) -> None:
        """Parse, check, draw faults, generate; then answer now or hand over to a delivery."""
        try:
            req = dialect.parse(request.body, self.params, stream=stream)
            self._check(req)
        except BadRequest as exc:
            conn.respond(exc.status, dialect.error_body(exc.status, exc.message, exc.param))
            return
        faults = self._faults.draw()
        metrics = self.metrics
        if faults.error:
            metrics.faults["error"] += 1
            status = self.params.faults.error_status
            conn.respond(status, req.error_body(status, "injected fault: error_rate"))
            return
        for kind in faults.kinds():
            metrics.faults[kind] += 1
        prefix = "chatcmpl-" if isinstance(req, ChatRequest) else "cmpl-"
        req.rid = f"{prefix}{next(self._ids):x}"
        req.created = wall_seconds()
        gen = generate(
            self.params,
            req.prompt,
            max_tokens=req.max_tokens,
            ignore_eos=req.ignore_eos,
            request_seed=req.seed,
            stop=req.stop,
            corrupt=faults.corrupt,
        )
        metrics.prompt_tokens += req.prompt_tokens
        metrics.request_prompt_tokens.observe(req.prompt_tokens)
        limit = self._limit
        if (
            self._instant
            and not faults.any_stream_fault
            and (limit is None or metrics.running < limit)
        ):
            self._answer_now(req, gen, conn)
            return
        delivery = Delivery(self, conn, req, gen, faults, request.arrival)
        if self._kv is not None:
            self._kv_needs(delivery, req, gen)
        self._admit(delivery)

    def _kv_needs(self, delivery: Delivery, req: GenerationRequest, gen: Generation) -> None:
        """What the request will ask of the KV cache: its tokens, its prompt's block names
        and the names of the blocks its answer fills (cached when it ends)."""
        params = self.params
        delivery.kv_tokens = req.prompt_tokens + len(gen.ids)
        if params.prefix_caching:
            size = params.block_size
            # The last prompt token is always computed (module kvcache), so blocks that
            # would cover it never count as hits.
            limit = (req.prompt_tokens - 1) // size
            delivery.kv_hashes = block_hashes(pieces_of(req.prompt, params.tokenizer), size, limit)
            # the text a conversation's next turn starts with: this prompt, then the answer
            after = pieces_of(req.prompt + req.answer_joint + gen.text, params.tokenizer)
            whole = block_hashes(after, size, delivery.kv_tokens // size)
            delivery.kv_tail = whole[len(delivery.kv_hashes) :]

    def _check(self, req: GenerationRequest) -> None:
        if not self.ready:
            raise BadRequest("the server is starting (slow_start_s)", status=503)
        params = self.params
        if req.model and req.model != params.model_name and req.model not in params.models:
            # vLLM 0.32's words (serve/engine/serving.py _check_model): its aliases are the
            # served model names, not the adapters
            raise BadRequest(
                f"The model `{req.model}` does not exist. Valid aliases: {params.model_name}.",
                "model",
                status=404,
            )
        limit = self.params.max_model_len
        if limit is not None and req.prompt_tokens + req.max_tokens > limit:
            raise BadRequest(
                f"This model's maximum context length is {limit} tokens. However, you"
                f" requested {req.prompt_tokens + req.max_tokens} tokens"
                f" ({req.prompt_tokens} in the messages, {req.max_tokens} in the completion).",
                "max_tokens",
            )
        kv = self._kv
        if kv is not None and kv.blocks_for(req.prompt_tokens + req.max_tokens) > kv.total_blocks:
            raise BadRequest(
                f"the request needs {req.prompt_tokens + req.max_tokens} tokens of KV cache;"
                f" the whole cache holds {kv.total_blocks * kv.block_size} (kv_cache_tokens)",
                "max_tokens",
            )

    def _answer_now(self, req: GenerationRequest, gen: Generation, conn: Connection) -> None:
        """Zero latency, no fault, a free slot: the whole answer in one write."""
        if req.stream:
            body = b"".join(req.events(gen)) + req.tail(gen)
            conn.start_stream(req.content_type, body, last=True)
        else:
            conn.respond(200, req.whole(gen))
        self.metrics.queue_time.observe(0.0)
        self._account(gen, ttft=0.0, e2e=0.0)

    def _account(self, gen: Generation, *, ttft: float, e2e: float) -> None:
        metrics = self.metrics
        n = len(gen.ids)
        metrics.generation_tokens += n
        metrics.request_generation_tokens.observe(n)
        metrics.finished["length" if gen.finish_reason == "length" else "stop"] += 1
        metrics.ttft.observe(ttft)
        metrics.e2e.observe(e2e)
        if self._instant and n > 1:
            metrics.itl.observe(0.0, n - 1)

    # -- admission
    def _admit(self, delivery: Delivery) -> None:
        metrics = self.metrics
        limit = self._limit
        # First come, first served: nobody overtakes a request waiting for KV blocks.
        if (
            (limit is None or metrics.running < limit)
            and not metrics.waiting
            and self._hold(delivery)
        ):
            metrics.running += 1
            delivery.start(self.loop.time(), queued=False)
        elif self._max_waiting is None or metrics.waiting < self._max_waiting:
            delivery.waiting = True
            metrics.waiting += 1
            self._queue.append(delivery)
        else:
            metrics.rejected += 1
            delivery.reject()

    def finished(self, delivery: Delivery, aborted: bool = False) -> None:
        """Called by a delivery once: done, or its client left (also while it waited)."""
        metrics = self.metrics
        if delivery.waiting:
            delivery.waiting = False
            metrics.waiting -= 1
            metrics.aborted += 1
            return  # left in the queue; skipped when popped
        metrics.running -= 1
        if delivery.kv is not None and self._kv is not None:
            self._kv.release(delivery.kv, None if aborted else delivery.kv_tail)
            delivery.kv = None
        if aborted:
            metrics.aborted += 1
        else:
            now = self.loop.time()
            self._account(
                delivery.generation,
                ttft=delivery.first_token_at - delivery.base,
                e2e=now - delivery.base,
            )
        self._admit_waiting()

    def _admit_waiting(self) -> None:
        queue, metrics, limit = self._queue, self.metrics, self._limit
        while queue and (limit is None or metrics.running < limit):
            delivery = queue[0]
            if not delivery.waiting:
                queue.popleft()
                continue  # its client left while it waited
            if not self._hold(delivery):
                break  # the head waits for KV blocks; nobody overtakes it
            queue.popleft()
            delivery.waiting = False
            metrics.waiting -= 1
            metrics.running += 1
            delivery.start(self.loop.time(), queued=True)

    def _hold(self, delivery: Delivery) -> bool:
        """Take the request's KV blocks (its cached prompt tokens counted); False when they
        do not fit now. Always True without a KV cache."""
        kv = self._kv
        if kv is None:
            return True
        alloc = kv.allocate(delivery.kv_hashes, delivery.kv_tokens)
        if alloc is None:
            return False
        delivery.kv = alloc
        delivery.cached_tokens = alloc.cached_tokens
        metrics = self.metrics
        metrics.prefix_cache_queries += delivery.request.prompt_tokens
        metrics.prefix_cache_hits += alloc.cached_tokens
        return True
