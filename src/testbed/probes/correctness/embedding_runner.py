"""Running embeddings cases: plan them, send each to ``/v1/embeddings``, judge, record.

An embeddings case runs once, unary, over OpenAI (nothing streams, so it has no twin), with
the probe's concurrency and shuffled order. The answer goes through the embeddings client
(:func:`testbed.clients.embeddings.embed`), which checks the server's word: one vector per
input, indices used once, one length for all — the ``dimensions`` asked when it asked. What no
correct server sends is the case's FAIL with the client's words ("the server's error: …");
a refusal the case did not expect is FAIL too, one it did (``error:``) PASS. No answer —
refused or cut connection, a timeout, HTTP 502/503/504, the server gone mid-answer — is
ERROR, as for generation cases (:mod:`.runner`).

A server that cannot answer ``/v1/embeddings`` at all (hf, tgi: ``config.protocols``) is
refused before the run by :func:`unserved`, not SKIPPED case by case.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from testbed.clients.embeddings import Embeddings, embed, request_body
from testbed.clients.http import ConnectionPool, HttpClientError
from testbed.clients.response import Response
from testbed.config.correctness import CorrectnessProbe
from testbed.config.protocols import api_missing
from testbed.core.clock import monotonic_ns
from testbed.probes.correctness.cases import CaseFile
from testbed.probes.correctness.embedding_cases import EmbeddingCase
from testbed.probes.correctness.embedding_checks import evaluate
from testbed.probes.correctness.evaluators import Check, check_error
from testbed.probes.correctness.outputs import ErrorOutput, Output
from testbed.probes.correctness.runner import UNAVAILABLE, Result
from testbed.probes.correctness.skip import skip_reason
from testbed.results.verdict import Status

#: Decimals of the vectors kept in records (the cosine of two unit vectors so rounded moves
#: by less than 1e-9 per component).
DECIMALS = 6


@dataclass
class EmbeddingItem:
    """One embeddings case to run, with its golden vectors (None: it has none)."""

    case: EmbeddingCase
    file: str
    golden: list[list[float]] | None


@dataclass
class EmbeddingResult(Result):
    """A :class:`Result` whose record also holds the vectors the server sent."""

    answer: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        out = super().record()
        if self.answer is not None:
            out["embeddings"] = self.answer
        return out


def unserved(files: Sequence[CaseFile], deployment: Any) -> list[str]:
    """Why each embeddings case of ``files`` cannot run against ``deployment`` (a deployment
    model), file:line first, with the fix; empty when every one can."""
    problems = []
    for case_file in files:
        for case in case_file.embedding_cases:
            why = api_missing("embeddings", deployment)
            if why is not None:
                problems.append(
                    f"{case_file.places[case.name]}: case '{case.name}' is an embeddings case"
                    f" (api: embeddings), but {why} — run it against a server that serves it"
                    f" (vllm, sim): leave '{deployment.name}' out of correctness.deployments,"
                    " or give the embeddings cases a suite of their own (correctness.suites)"
                )
    return problems


def plan_embedding_items(
    files: Sequence[CaseFile], deployment: Mapping[str, Any], served: Sequence[str]
) -> tuple[list[EmbeddingItem], list[Result]]:
    """The embeddings cases to run, and the results of those skipped (with the reason)."""
    items: list[EmbeddingItem] = []
    skipped: list[Result] = []
    for case_file in files:
        for case in case_file.embedding_cases:
            golden = case_file.goldens.get(case.name)
            reason = skip_reason(case, deployment)
            if reason is None and "openai" not in served:
                reason = "the server does not speak the openai protocol (embeddings need it)"
            if reason is None and case.needs_expected() and golden is None:
                reason = "no expected embedding: record one with `testbed record`"
            if reason is None:
                items.append(EmbeddingItem(case, str(case_file.path), golden))
            else:
                path = str(case_file.path)
                skipped.append(Result(case.name, "openai", False, Status.SKIPPED, reason, path))
    return items, skipped


def body_of(case: EmbeddingCase, model: str) -> dict[str, Any]:
    """The ``/v1/embeddings`` body of ``case`` (no ``model`` when none is known)."""
    spec = case.request
    body = request_body(
        list(spec.input), model, dimensions=spec.dimensions, encoding_format=spec.encoding_format
    )
    if not model:
        del body["model"]
    return body | spec.extra


def judge(item: EmbeddingItem, response: Response, embeddings: Embeddings) -> list[Check]:
    """The case's evaluators on one answer (its error, when the client found one)."""
    case, error = item.case, response.error
    if case.error is not None:
        output = Output(error=ErrorOutput(response.status, error) if error else None)
        return [check_error(case.error, output)]
    if error is not None:
        said = f"the server's error: HTTP {response.status}: {error}"
        return [Check("answer", False, said if 200 <= response.status < 300 else error)]
    if case.skip_check:
        return []
    vectors = embeddings.vectors
    return [evaluate(rule, case, item.golden, vectors) for rule in case.evaluators]


@dataclass
class EmbeddingRunner:
    """Runs embeddings items against one endpoint."""

    config: CorrectnessProbe
    pool: ConnectionPool
    model: str
    emit: Callable[[Result], None]  # called once per result, as soon as it is known

    async def run(self, items: Sequence[EmbeddingItem], seed: int) -> list[Result]:
        """Run ``items`` (shuffled with ``seed`` when configured), ``concurrency`` at once."""
        order = list(items)
        if self.config.shuffle:
            random.Random(seed).shuffle(order)
        queue = list(reversed(order))
        results: list[Result] = []

        async def worker() -> None:
            while queue:
                result = await self._item(queue.pop())
                results.append(result)
                self.emit(result)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(self.config.concurrency, len(order))):
                group.create_task(worker())
        return results

    async def _item(self, item: EmbeddingItem) -> Result:
        """The result of one item; never raises (but lets cancellation through)."""
        case = item.case
        body = body_of(case, self.model)
        result = EmbeddingResult(case.name, "openai", False, Status.ERROR, "", item.file)
        result.request = body
        started = monotonic_ns()
        try:
            response, embeddings = await embed(self.pool, body, timeout_s=self.config.timeout_s)
            result.reason = await self._no_answer(item, response) or ""
            if not result.reason:
                self._judged(result, item, response, embeddings)
        except (HttpClientError, TimeoutError) as exc:  # the client's timeout is both
            result.reason = str(exc) or f"no answer within {self.config.timeout_s:g} s"
        except Exception as exc:  # a testbed bug must not take the other cases down
            result.reason = f"testbed failed on this case: {exc!r}"
        result.duration_ms = round((monotonic_ns() - started) / 1e6, 3)
        return result

    async def _no_answer(self, item: EmbeddingItem, response: Response) -> str | None:
        """Why the exchange is no answer at all (ERROR), or None when it is one."""
        cut = 200 <= response.status < 300 and not response.ended
        if cut and not await self.pool.reachable():  # killed or evicted mid-answer
            return f"{response.error}; then no new connection: the server went away"
        if response.status in UNAVAILABLE and item.case.error is None:
            return f"server unavailable: {response.error}"
        return None

    def _judged(
        self, result: EmbeddingResult, item: EmbeddingItem, response: Response, found: Embeddings
    ) -> None:
        """Fill ``result`` with the judgement of an answer."""
        result.checks = judge(item, response, found)
        failed = [c for c in result.checks if not c.passed]
        result.status = Status.FAIL if failed else Status.PASS
        result.reason = "; ".join(f"{c.evaluator}: {c.detail}" for c in failed)[:500]
        if not failed and item.case.skip_check and item.case.error is None:
            result.checked = False
            result.reason = "answer not compared (skip_check)"
        if response.error is None and found.vectors:
            vectors = [[round(x, DECIMALS) for x in v] for v in found.vectors]
            result.answer = {"dimensions": found.dimensions, "vectors": vectors}
