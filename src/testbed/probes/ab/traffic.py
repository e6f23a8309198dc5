"""Sending A/B traffic: the order (paired or split, seeded), the pacing, one record a request.

Paired order: the pairs are shuffled; the two requests of a pair are adjacent, their order
decided by a coin, so both deployments see each prompt at nearly the same moment and
neither side is systematically first. Split order: exactly ``round(requests · split)``
requests (at least one, at most all but one) go to the canary, their positions shuffled;
prompts follow a shuffled cycle over the set.

Pacing: closed loop keeps at most ``concurrency`` requests in flight — per deployment when
paired (a dispatcher walks the order and waits for a free slot of the request's side, so the
pair structure survives), for the one stream when split. Open loop releases one pair (or one
request when split) every ``1 / rate`` seconds, whatever is still in flight.

A record (:class:`testbed.results.records.AbRecord`) is written the moment its request ends
(never only held in memory): side, deployment, prompt id, pair and sequence numbers, raw
``monotonic_ns`` timestamps (``started_ns``; ``sent_ns``, ``chunks_ns``, ``done_ns`` — the
names and meanings :mod:`testbed.results.metrics` reads, as in a load record), HTTP status,
output text, the server's output token count, finish reason and error.

A server's counts are checked, not trusted (:mod:`testbed.clients.counts`): every protocol's
sink gets the request's limits, so a count over ``max_tokens``, negative or not a number is
that request's error (a server error, counted on its side), and ``usage_output_tokens`` is
only ever a count the client accepted — null when the answer failed, never ``"abc"`` or −5
for the token totals to add up. (It is the server's count, so it is not named
``output_tokens``: in a load record that is the client's.)
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from testbed.clients.apis import APIS, Request
from testbed.clients.counts import token_count
from testbed.clients.http import ConnectionPool, HttpClientError, ReadTimeout
from testbed.clients.http_errors import ErrorKind
from testbed.clients.response import Response
from testbed.clients.tgis import TgisPool
from testbed.core.clock import monotonic_ns
from testbed.probes.ab.prompts import Prompt
from testbed.results.records import AbRecord

Side = Literal["stable", "canary"]
SIDES: tuple[Side, Side] = ("stable", "canary")
Api = Literal["completions", "chat", "tgi", "tgis"]


@dataclass(frozen=True)
class AbRequest:
    """One request of the A/B order: ``seq`` is its place in it; ``pair`` the pair it belongs
    to (paired) or its place in the stream (split)."""

    seq: int
    pair: int
    side: Side
    prompt: Prompt


def paired_order(prompts: Sequence[Prompt], requests: int, rng: random.Random) -> list[AbRequest]:
    """``requests`` pairs (prompt ``i mod len(prompts)`` for pair ``i``), in random order."""
    pairs = list(range(requests))
    rng.shuffle(pairs)
    order: list[AbRequest] = []
    for pair in pairs:
        prompt = prompts[pair % len(prompts)]
        sides = SIDES if rng.random() < 0.5 else SIDES[::-1]
        for side in sides:
            order.append(AbRequest(len(order), pair, side, prompt))
    return order


def split_order(
    prompts: Sequence[Prompt], requests: int, split: float, rng: random.Random
) -> list[AbRequest]:
    """One stream of ``requests`` requests, a ``split`` share of them to the canary."""
    if requests < 2:
        n_canary = 1 if split >= 0.5 else 0
    else:
        n_canary = min(requests - 1, max(1, round(requests * split)))
    canary: list[Side] = ["canary"] * n_canary
    stable: list[Side] = ["stable"] * (requests - n_canary)
    sides = canary + stable
    rng.shuffle(sides)
    cycle = list(range(len(prompts)))
    rng.shuffle(cycle)
    return [AbRequest(i, i, side, prompts[cycle[i % len(cycle)]]) for i, side in enumerate(sides)]


# -- one request ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """How to reach one side: its pool, deployment name, model and request options."""

    side: Side
    deployment: str
    pool: ConnectionPool | TgisPool  # the gRPC channel for tgis
    model: str
    api: Api
    max_tokens: int
    temperature: float
    timeout_s: float
    extra_body: Mapping[str, Any] = field(default_factory=dict, kw_only=True)

    def body(self, prompt: Prompt) -> dict[str, Any]:
        """The body for ``prompt`` (greedy unless a temperature is set), with the probe's
        ``extra_body`` merged in."""
        api = APIS[self.api]
        request = Request(
            prompt.as_text(),
            messages=prompt.as_messages(),
            model=self.model,
            max_tokens=prompt.max_tokens or self.max_tokens,
            temperature=self.temperature,
        )
        return api.merge(api.body(request), self.extra_body)

    async def send(self, prompt: Prompt) -> Response:
        api = APIS[self.api]
        return await api.send(self.pool, self.body(prompt), timeout_s=self.timeout_s)


def record_of(
    request: AbRequest,
    target: Target,
    response: Response | None,
    failure: str | None,
    t_start_ns: int,
    failure_kind: ErrorKind | None = None,
) -> AbRecord:
    """The record of one finished (or failed) request; ``failure_kind``: the kind of the
    client's exception when no answer came (``error_kind``; ``server`` for its answer's)."""
    if response is None:
        response = Response()
    # An empty answer (the model stopped at once) is an output like any other: it has no
    # TTFT, but it is compared and timed end to end.
    error = failure or response.error
    usage = response.usage if isinstance(response.usage, dict) else {}
    return {
        "probe": "ab",
        "side": request.side,
        "deployment": target.deployment,
        "pair": request.pair,
        "seq": request.seq,
        "prompt_id": request.prompt.id,
        "started_ns": t_start_ns,
        "sent_ns": response.t_sent_ns or None,
        "chunks_ns": [t for t, _ in response.chunks],
        "done_ns": response.t_done_ns or None,
        "failed_ns": monotonic_ns() if failure else None,
        "status": response.status,
        "error": error,
        "error_kind": None if error is None else failure_kind if failure else "server",
        "text": response.text if failure is None else "",
        # the server's count only when its answer stood: a refused count is the error's
        "usage_output_tokens": token_count(usage.get("completion_tokens"))
        if error is None
        else None,
        "finish_reason": response.finish_reason,
    }


async def send_one(request: AbRequest, target: Target) -> AbRecord:
    """Send ``request`` to ``target``; connection failures and timeouts become the record's
    error (a per-request fact), never an exception."""
    t_start = monotonic_ns()
    try:
        response = await target.send(request.prompt)
    except ReadTimeout as exc:
        failure = f"timeout after {target.timeout_s:g} s"
        return record_of(request, target, None, failure, t_start, exc.kind)
    except HttpClientError as exc:
        return record_of(request, target, None, str(exc), t_start, exc.kind)
    return record_of(request, target, response, None, t_start)


# -- pacing --------------------------------------------------------------------------------


def _releaser(slot: asyncio.Semaphore) -> Callable[[asyncio.Task[None]], None]:
    return lambda _task: slot.release()


Send = Callable[[AbRequest], Coroutine[Any, Any, None]]


async def drive(
    order: Sequence[AbRequest], send: Send, *, concurrency: int, rate: float | None, per_side: bool
) -> None:
    """Send every request in order, closed loop (``concurrency``) or open loop (``rate``).

    ``per_side``: the concurrency limit applies to each side separately, and open loop
    releases a whole pair (consecutive requests of one ``pair``) at each tick.
    """
    async with asyncio.TaskGroup() as group:
        if rate is None:
            shared = asyncio.Semaphore(concurrency)
            slots = {s: asyncio.Semaphore(concurrency) for s in SIDES} if per_side else {}
            for request in order:
                slot = slots.get(request.side, shared)
                await slot.acquire()
                task = group.create_task(send(request))
                task.add_done_callback(_releaser(slot))
            return
        t0 = monotonic_ns()
        tick = -1
        previous_pair: int | None = None
        for request in order:
            if not per_side or request.pair != previous_pair:
                tick += 1
                previous_pair = request.pair
                delay = (t0 + round(tick * 1e9 / rate) - monotonic_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
            group.create_task(send(request))
