"""Running cases against one endpoint: plan, shuffle, run concurrently, judge, record.

Each case runs once per protocol it applies to (unary), then as its streaming twin. Every
outcome is a :class:`Result` — PASS, FAIL (the answer is wrong), ERROR (no answer: the
connection was refused or cut, the server timed out or is unavailable, with the cause) or
SKIPPED (with the rule) — written as a record the moment it is known. A case's failure,
even a bug in testbed, never cancels the other cases: each is judged on its own.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed.clients.http import ConnectionPool
from testbed.clients.tgis import TgisPool
from testbed.config.correctness import CorrectnessProbe
from testbed.core.clock import monotonic_ns
from testbed.core.errors import InfrastructureError
from testbed.probes.correctness.cases import Case, CaseFile, ProtocolName
from testbed.probes.correctness.evaluators import (
    Check,
    Settings,
    check_error,
    run_evaluator,
    twin_check,
)
from testbed.probes.correctness.exchange import Exchange, api_of, build_body, send
from testbed.probes.correctness.outputs import Output
from testbed.probes.correctness.skip import skip_reason
from testbed.probes.correctness.stream_check import check_stream
from testbed.results.verdict import Status

#: Statuses that say the server (or a proxy before it) is unavailable, not wrong.
UNAVAILABLE = (502, 503, 504)


@dataclass
class Item:
    """One case on one protocol."""

    case: Case
    protocol: ProtocolName
    file: str


#: A case result that ran without a failure but was compared to nothing (``skip_check``).
UNCHECKED = "UNCHECKED"


@dataclass
class Result:
    """The outcome of one request of a case (unary, or its streaming twin)."""

    case: str
    protocol: str
    stream: bool
    status: Status
    reason: str = ""
    file: str = ""
    greedy: bool = True
    checks: list[Check] = field(default_factory=list)
    output: Output | None = None
    request: dict[str, Any] | None = None
    duration_ms: float = 0.0
    checked: bool = True  # False: ran (stream checked) but its answer compared to nothing

    @property
    def outcome(self) -> str:
        """The case-level outcome: the status, or UNCHECKED for a ``skip_check`` case that
        ran cleanly — counted on its own, never as passed."""
        return UNCHECKED if self.status is Status.PASS and not self.checked else self.status.value

    @property
    def id(self) -> str:
        return f"{self.case}/{self.protocol}" + ("/stream" if self.stream else "")

    def record(self) -> dict[str, Any]:
        """The record of this result (one line of records.jsonl)."""
        out: dict[str, Any] = {
            "kind": "case",
            "id": self.id,
            "case": self.case,
            "protocol": self.protocol,
            "stream": self.stream,
            "status": self.outcome,
            "reason": self.reason,
            "file": self.file,
            "greedy": self.greedy,
            "duration_ms": self.duration_ms,
            "checks": [c.to_json() for c in self.checks],
        }
        if self.output is not None:
            out["output"] = self.output.to_json()
        if self.request is not None:
            out["request"] = self.request
        return out


def protocols_of(case: Case, config: CorrectnessProbe) -> list[ProtocolName]:
    chosen = case.protocol or config.protocol
    return ["openai", "tgi"] if chosen == "both" else [chosen]


def plan_items(
    files: Sequence[CaseFile],
    config: CorrectnessProbe,
    deployment: Mapping[str, Any],
    served: Sequence[str],
) -> tuple[list[Item], list[Result]]:
    """The items to run, and the results of those skipped (with the reason)."""
    items, skipped = [], []
    for case_file in files:
        for case in case_file.cases:
            for protocol in protocols_of(case, config):
                reason = skip_reason(case, deployment)
                if reason is None and protocol not in served:
                    reason = f"the server does not speak the {protocol} protocol"
                if reason is None and api_of(protocol, case.request).chat != case.request.chat:
                    reason = "a chat case needs the OpenAI protocol"
                if reason is None and case.needs_expected() and not case.expected_for(protocol):
                    reason = f"no expected answer for {protocol}: record one with `testbed record`"
                if reason is not None:
                    result = Result(
                        case.name, protocol, False, Status.SKIPPED, reason, str(case_file.path)
                    )
                    skipped.append(result)
                else:
                    items.append(Item(case, protocol, str(case_file.path)))
    return items, skipped


@dataclass
class Runner:
    """Runs items against one endpoint."""

    config: CorrectnessProbe
    pool: ConnectionPool
    model: str
    settings: Settings
    emit: Callable[[Result], None]  # called once per result, as soon as it is known
    extra_logprobs: int | None = None  # asked of cases that ask none (for the differential)
    grpc: TgisPool | None = None  # the channel of the tgis protocol (None: not served)

    async def run(self, items: Sequence[Item], seed: int) -> list[Result]:
        """Run ``items`` (shuffled with ``seed`` when configured), ``concurrency`` at once."""
        order = list(items)
        if self.config.shuffle:
            random.Random(seed).shuffle(order)
        queue = list(reversed(order))
        results: list[Result] = []

        async def worker() -> None:
            while queue:
                item = queue.pop()
                for result in await self._item(item):
                    results.append(result)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(self.config.concurrency, len(order)) or 1):
                group.create_task(worker())
        return results

    async def _item(self, item: Item) -> list[Result]:
        """The unary result and its twin; never raises (but lets cancellation through)."""
        out: list[Result] = []
        try:
            unary = await self._unary(item)
            self._done(out, unary)
            if self.config.streaming_twins and item.case.stream_twin:
                self._done(out, await self._twin(item, unary))
        except Exception as exc:  # a testbed bug must not take the other cases down
            cause = (
                str(exc)
                if isinstance(exc, InfrastructureError)
                else f"testbed failed on this case: {exc!r}"
            )
            result = Result(
                item.case.name, item.protocol, bool(out), Status.ERROR, cause, item.file
            )
            self._done(out, result)
        return out

    def _done(self, out: list[Result], result: Result) -> None:
        out.append(result)
        self.emit(result)

    def _logprobs(self, case: Case) -> int | None:
        if case.request.logprobs is not None or case.error is not None:
            return case.request.logprobs
        return self.extra_logprobs

    async def _exchange(self, item: Item, stream: bool) -> Exchange | Result:
        case = item.case
        api = api_of(item.protocol, case.request)
        body = build_body(api, case.request, self.model, self._logprobs(case))
        started = monotonic_ns()
        try:
            pool = self.grpc if api.grpc else self.pool
            if pool is None:
                raise InfrastructureError("the endpoint has no gRPC address for the tgis protocol")
            return await send(
                pool,
                api,
                body,
                stream=stream,
                timeout_s=self.config.timeout_s,
            )
        except InfrastructureError as exc:
            return Result(
                case.name,
                item.protocol,
                stream,
                Status.ERROR,
                str(exc),
                item.file,
                case.request.greedy,
                request=body,
                duration_ms=round((monotonic_ns() - started) / 1e6, 3),
            )

    def _result(self, item: Item, exchange: Exchange, checks: list[Check]) -> Result:
        case, output = item.case, exchange.output
        failed = [c for c in checks if not c.passed]
        status, reason, checked = Status.PASS, "", True
        if failed:
            status = Status.FAIL
            reason = "; ".join(f"{c.evaluator}: {c.detail}" for c in failed)[:500]
        elif case.skip_check and case.error is None:
            checked = False
            shape = "stream well-formed, " if exchange.stream else ""
            reason = f"{shape}answer not compared (skip_check)"
        if output.error is not None and output.error.status in UNAVAILABLE and case.error is None:
            status = Status.ERROR
            reason = f"server unavailable: HTTP {output.error.status}: {output.error.message}"
        return Result(
            case.name,
            item.protocol,
            exchange.stream,
            status,
            reason,
            item.file,
            case.request.greedy,
            checks,
            output,
            exchange.body,
            exchange.duration_ms,
            checked,
        )

    async def _judge(self, item: Item, output: Output) -> list[Check]:
        """The case's evaluators on one answer."""
        case = item.case
        if case.error is not None:
            return [check_error(case.error, output)]
        if output.error is not None:
            # a 2xx answer carrying an error is no refusal: the client found it wrong (an
            # error object, cut short, counts that cannot be true)
            how = "the server's error" if 200 <= output.error.status < 300 else "refused"
            message = f"{how}: HTTP {output.error.status}: {output.error.message}"
            return [Check("answer", False, message, "an answer", output.to_json())]
        if case.skip_check:
            return []
        expected = case.expected_for(item.protocol)
        greedy = case.request.greedy
        return [
            await run_evaluator(e, expected, output, self.settings, greedy=greedy)
            for e in case.evaluators
        ]

    async def _unary(self, item: Item) -> Result:
        exchange = await self._exchange(item, stream=False)
        if isinstance(exchange, Result):
            return exchange
        return self._result(item, exchange, await self._judge(item, exchange.output))

    async def _twin(self, item: Item, unary: Result) -> Result:
        """The streamed request. It passes only when its own answer is right — a
        well-formed stream, or the refusal the case expects — *and* agrees with the unary
        answer: two refusals agree with each other, yet a refused stream is no stream."""
        exchange = await self._exchange(item, stream=True)
        if isinstance(exchange, Result):
            return exchange
        checks: list[Check] = []
        refused = exchange.output.error is not None and not exchange.payloads
        if refused or item.case.error is not None:
            checks += await self._judge(item, exchange.output)
        else:
            problems = check_stream(exchange)
            checks.append(Check("stream", not problems, "; ".join(problems)))
            if unary.output is None:  # the unary request had no answer: judge this one alone
                checks += await self._judge(item, exchange.output)
        if unary.output is not None and not (item.case.skip_check and unary.output.error is None):
            greedy = item.case.request.greedy
            checks.append(twin_check(unary.output, exchange.output, self.settings, greedy=greedy))
        return self._result(item, exchange, checks)
