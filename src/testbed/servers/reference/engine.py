"""Dynamic batching: one background thread decodes every running request together.

The asyncio side calls :meth:`Engine.generate` and iterates over :class:`Step` events. The
worker thread (owned by :meth:`Engine.run`, which the server's TaskGroup awaits) loops:

1. admit waiting requests into the running batch (up to ``max_batch``): each prompt is
   prefilled on its own, its first token chosen and sent;
2. one decode step for the whole running batch; each row's token is chosen, detokenized,
   checked against EOS, stop strings and its length limit, and sent;
3. finished and abandoned requests leave the batch; with nothing to do the thread sleeps on
   a condition until a request arrives.

So requests join and leave between decode steps, never waiting for a whole batch to end.
Events cross to the event loop with ``call_soon_threadsafe``; nothing else is shared.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import torch

from testbed.core.clock import monotonic_ns
from testbed.servers.reference.metrics import EngineMetrics
from testbed.servers.reference.model import RowCache
from testbed.servers.reference.sampling import SamplingParams, choose, logprobs_of, new_generator
from testbed.servers.reference.served import ServedModel, special_ids

FIRST_CAPACITY = 256  # KV slots reserved beyond the prompt at first; the cache grows on demand


class RequestTooLong(ValueError):
    """Prompt plus max_tokens exceed the context length (answered with HTTP 400)."""


@dataclass(frozen=True)
class TokenInfo:
    """One generated token: its id, its text alone, its logprob and the alternatives."""

    id: int
    text: str
    logprob: float | None
    top: tuple[tuple[int, str, float], ...] = ()
    special: bool = False


@dataclass(frozen=True)
class Step:
    """What one request gained in one engine step."""

    token: TokenInfo | None  # None only for a final event without a token (abandoned, error)
    text: str  # new text, held back while it may still become a stop string
    finish_reason: str | None = None  # "stop" | "length" | "error"
    stop_kind: str | None = None  # "eos_token" | "stop_sequence" (TGI wants the difference)
    error: str | None = None


@dataclass(eq=False)
class _Sequence:
    prompt: list[int]
    params: SamplingParams
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Step]
    arrival_ns: int
    generated: list[int] = field(default_factory=list)
    text: str = ""  # everything decoded so far (cut at a stop string when one matches)
    sent: int = 0  # characters of ``text`` already sent
    cache: Any = None  # the model's per-request cache (RowCache, Seq2SeqRow)
    generator: torch.Generator | None = None
    first_token_ns: int = 0
    cancelled: bool = False

    def emit(self, step: Step) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, step)


class Engine:
    """Owns the model, the waiting queue and the running batch."""

    def __init__(self, loaded: ServedModel, *, max_batch: int, max_len: int, threads: int) -> None:
        self.loaded = loaded
        self.max_batch = max_batch
        self.max_len = max_len
        self.threads = threads
        self.metrics = EngineMetrics(loaded.name, kv_capacity=max_batch * max_len)
        self._waiting: deque[_Sequence] = deque()
        self._running: list[_Sequence] = []
        self._wake = threading.Condition()
        self._stopping = False
        # Tokens the text leaves out (decode skips them): EOS and every added special token.
        self._special = loaded.eos_ids | special_ids(loaded.tokenizer)

    # -- asyncio side ---------------------------------------------------------------------

    async def run(self) -> None:
        """Run the worker thread until :meth:`stop`; await this inside the server's TaskGroup."""
        try:
            await asyncio.to_thread(self._work)
        finally:
            self.stop()

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()

    def check_length(self, prompt_len: int, max_tokens: int) -> None:
        if prompt_len + max_tokens > self.max_len:
            raise RequestTooLong(
                f"This model's maximum context length is {self.max_len} tokens. However, you"
                f" requested {prompt_len + max_tokens} tokens ({prompt_len} in the prompt,"
                f" {max_tokens} for the completion). Please reduce the prompt or max_tokens."
            )

    def generate(self, prompt: list[int], params: SamplingParams) -> AsyncGenerator[Step]:
        """Queue a request; its steps, in order. Closing the generator early (a client that
        went away) abandons the request. Raises :class:`RequestTooLong` here, before any
        step, so a handler can still answer 400."""
        self.check_length(len(prompt), params.max_tokens)
        seq = _Sequence(prompt, params, asyncio.get_running_loop(), asyncio.Queue(), monotonic_ns())
        with self._wake:
            if self._stopping:
                raise RuntimeError("the engine is shutting down")
            self._waiting.append(seq)
            self.metrics.waiting = len(self._waiting)
            self._wake.notify()
        return self._steps(seq)

    async def _steps(self, seq: _Sequence) -> AsyncGenerator[Step]:
        try:
            while True:
                step = await seq.queue.get()
                yield step
                if step.finish_reason is not None:
                    return
        finally:
            seq.cancelled = True  # read by the worker thread: drop it at the next step

    # -- worker thread --------------------------------------------------------------------

    def _work(self) -> None:
        torch.set_num_threads(self.threads)  # again here: some OpenMP runtimes keep it per thread
        while True:
            with self._wake:
                while not self._stopping and not self._waiting and not self._running:
                    self._wake.wait()
                if self._stopping:
                    break
            self._admit()
            try:
                self._decode()
            except Exception as exc:  # a failed step fails its requests, not the server
                failed, self._running = self._running, []
                for seq in failed:
                    seq.emit(Step(None, "", "error", error=f"{type(exc).__name__}: {exc}"))
        self._fail_all("the server is shutting down")

    def _admit(self) -> None:
        while len(self._running) < self.max_batch:
            with self._wake:
                if not self._waiting:
                    return
                seq = self._waiting.popleft()
                self.metrics.waiting = len(self._waiting)
            if seq.cancelled:
                continue
            capacity = min(
                len(seq.prompt) + seq.params.max_tokens, len(seq.prompt) + FIRST_CAPACITY
            )
            try:
                seq.cache = self.loaded.new_cache(capacity)
                seq.generator = new_generator(seq.params.seed)
                logits = self.loaded.prefill(seq.prompt, seq.cache)
            except Exception as exc:  # this request fails; the others go on
                seq.emit(Step(None, "", "error", error=f"{type(exc).__name__}: {exc}"))
                continue
            self.metrics.prompt_tokens += len(seq.prompt)
            seq.first_token_ns = monotonic_ns()
            self.metrics.observe_first_token(seq.first_token_ns - seq.arrival_ns)
            if not self._advance(seq, logits):
                self._running.append(seq)
        self._gauge()

    def _decode(self) -> None:
        self._running = [s for s in self._running if not s.cancelled]
        self._gauge()
        if not self._running:
            return
        for seq in self._running:
            assert seq.cache is not None
            if seq.cache.length >= seq.cache.capacity:
                seq.cache = _grown(seq.cache, len(seq.prompt) + seq.params.max_tokens)
        caches = [s.cache for s in self._running if s.cache is not None]
        self.metrics.batch.observe(len(caches))
        logits = self.loaded.decode([s.generated[-1] for s in self._running], caches)
        self._running = [s for i, s in enumerate(self._running) if not self._advance(s, logits[i])]
        self._gauge()

    def _advance(self, seq: _Sequence, logits: torch.Tensor) -> bool:
        """Choose, record and send one token; True when the request has finished."""
        params = seq.params
        assert seq.generator is not None
        token = choose(logits, params, seq.generator)
        seq.generated.append(token)
        self.metrics.generation_tokens += 1
        tokenizer = self.loaded.tokenizer
        special = token in self._special
        info = TokenInfo(token, tokenizer.decode([token]), None, special=special)
        if params.logprobs is not None:
            chosen, top = logprobs_of(logits, token, params.logprobs)
            alternatives = tuple((i, tokenizer.decode([i]), lp) for i, lp in top)
            info = TokenInfo(token, info.text, chosen, alternatives, special)
        finish, kind = None, None
        if token in self.loaded.eos_ids and not params.ignore_eos:
            finish, kind = "stop", "eos_token"
        else:
            seq.text = tokenizer.decode(seq.generated, skip_special_tokens=True)
            cut = _find_stop(seq.text, params.stop, seq.sent)
            if cut is not None:
                seq.text, finish, kind = seq.text[:cut], "stop", "stop_sequence"
        if finish is None and len(seq.generated) >= params.max_tokens:
            finish = "length"
        safe = len(seq.text) if finish else _safe_length(seq.text, params.stop)
        delta = seq.text[seq.sent : max(safe, seq.sent)]
        seq.sent += len(delta)
        seq.emit(Step(info, delta, finish, kind))
        if finish is not None:
            self.metrics.observe_finished(seq, finish, monotonic_ns())
            seq.cache = None
        return finish is not None

    def _fail_all(self, message: str) -> None:
        with self._wake:
            doomed = list(self._waiting) + self._running
            self._waiting.clear()
        self._running = []
        for seq in doomed:
            seq.emit(Step(None, "", "error", error=message))
        self.metrics.running = self.metrics.waiting = self.metrics.kv_tokens = 0

    def _gauge(self) -> None:
        """Running requests and the tokens their KV caches hold, for ``/metrics``."""
        self.metrics.running = len(self._running)
        self.metrics.kv_tokens = sum(len(s.prompt) + len(s.generated) for s in self._running)


def _grown(cache: RowCache, limit: int) -> RowCache:
    """A copy of ``cache`` with twice the room (at most ``limit`` tokens)."""
    bigger = RowCache(
        len(cache.keys),
        cache.keys[0].shape[1],
        cache.keys[0].shape[3],
        min(2 * cache.capacity, limit),
        cache.keys[0].dtype,
    )
    for layer in range(len(cache.keys)):
        bigger.keys[layer][:, :, : cache.length] = cache.keys[layer][:, :, : cache.length]
        bigger.values[layer][:, :, : cache.length] = cache.values[layer][:, :, : cache.length]
    bigger.length = cache.length
    return bigger


def _find_stop(text: str, stops: tuple[str, ...], sent: int) -> int | None:
    """Where the earliest stop string starts in the unsent tail (and what precedes it)."""
    longest = max((len(s) for s in stops), default=0)
    start = max(0, sent - longest)
    hits = [i for s in stops if s and (i := text.find(s, start)) >= 0]
    return min(hits) if hits else None


def _safe_length(text: str, stops: tuple[str, ...]) -> int:
    """How much of ``text`` can be sent: not a tail that may grow into a stop string, and
    not a trailing replacement character (an incomplete multi-byte token)."""
    end = len(text)
    for stop in stops:
        for k in range(min(len(stop) - 1, end), 0, -1):
            if text.endswith(stop[:k]):
                end = min(end, len(text) - k)
                break
    while end > 0 and text[end - 1] == "\ufffd":
        end -= 1
    return end
