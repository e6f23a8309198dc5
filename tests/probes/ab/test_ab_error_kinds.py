"""A/B records a failed request's kind from the client's exception type (``error_kind``);
whether a side was reached, and the error kinds of the summary, follow that kind — never the
message's words."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from testbed.clients.http import ConnectionPool
from testbed.clients.http_errors import (
    ConnectError,
    HttpClientError,
    ReadTimeout,
    RemoteProtocolError,
)
from testbed.clients.response import Response
from testbed.core.errors import InfrastructureError
from testbed.probes.ab import _check_reached, prompts, traffic
from testbed.probes.ab.compare import error_summary
from testbed.probes.ab.prompts import Prompt
from testbed.probes.ab.traffic import AbRequest, Target


@dataclass(frozen=True)
class Failing(Target):
    """A side whose every request fails with ``failure``."""

    failure: BaseException | None = None

    async def send(self, prompt: Prompt) -> Response:
        del prompt
        assert self.failure is not None
        raise self.failure


def records_of(side: traffic.Side, failures: list[BaseException]) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        pool = ConnectionPool("http://127.0.0.1:9")
        written = []
        for seq, failure in enumerate(failures):
            target = Failing(side, side, pool, "m", "completions", 8, 0.0, 5.0, failure)
            request = AbRequest(seq, seq, side, prompts.synthetic(1, 0)[0])
            written.append(await traffic.send_one(request, target))
        return written

    return asyncio.run(main())


def targets() -> dict[traffic.Side, Target]:
    pool = ConnectionPool("http://127.0.0.1:9")
    return {
        s: Target(s, f"{s}-deployment", pool, "m", "completions", 8, 0.0, 5.0)
        for s in ("stable", "canary")
    }


def test_a_failure_s_kind_is_its_exception_type_s() -> None:
    records = records_of(
        "canary",
        [ConnectError("the peer said no"), ReadTimeout("slow"), RemoteProtocolError("garbled")],
    )
    assert [r["error_kind"] for r in records] == ["connect", "timeout", "protocol"]
    assert records[0]["error"] == "the peer said no"
    assert records[1]["error"] == "timeout after 5 s"


def test_a_side_none_of_whose_requests_connected_is_an_error_whatever_the_words() -> None:
    records = records_of("canary", [ConnectError("the peer said no")] * 3)
    records += records_of("stable", [ReadTimeout("slow")])
    with pytest.raises(InfrastructureError, match="the canary deployment 'canary-deployment'"):
        _check_reached(records, targets())


@pytest.mark.parametrize(
    "failures",
    [
        [RemoteProtocolError("connection: closed before the head")] * 2,
        [ConnectError("connection: refused"), ReadTimeout("connection: slow")],
    ],
    ids=["protocol-errors-worded-as-connection", "one-timeout"],
)
def test_a_side_with_a_failure_of_another_kind_was_reached(failures: list[HttpClientError]) -> None:
    records = records_of("canary", list(failures))
    _check_reached(records, targets())  # no error: the side answered, or may have


def test_the_summary_counts_errors_by_kind_and_status() -> None:
    records = records_of("canary", [ConnectError("a"), ConnectError("b"), ReadTimeout("c")])
    records += records_of("stable", [RemoteProtocolError("HTTP 500: said the text")])
    server = {
        "side": "stable",
        "error": "stream cut short: no [DONE]",
        "status": 200,
        "error_kind": "server",
    }
    refused = {
        "side": "stable",
        "error": "the server refused",
        "status": 503,
        "error_kind": "server",
    }
    kinds = error_summary([*records, server, refused], 0.95)["kinds"]
    assert kinds["canary"] == {"connect": 2, "timeout": 1}
    assert kinds["stable"] == {"protocol": 1, "stream cut short": 1, "HTTP 503": 1}
