"""A failed request's kind comes from the client's exception type and is recorded as
``error_kind``; whether the server is down (every request's kind ``connect``) is decided on
that kind, never on the message's words — a reworded message changes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.clients.http_errors import (
    ConnectError,
    ConnectTimeout,
    HttpClientError,
    ReadTimeout,
    RemoteProtocolError,
)
from testbed.core.errors import InfrastructureError
from testbed.probes.load.dataset import Item
from testbed.probes.load.probe import _raise_if_down
from testbed.probes.load.runner import LoadGenerator, Options, Stage
from testbed.probes.load.tokens import RuleCounter


class FailingSender:
    """A sender whose every request fails with the next of ``failures``."""

    def __init__(self, failures: list[BaseException]) -> None:
        self._failures = failures

    async def send(
        self,
        payload: bytes,
        sink: Any,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> int:
        del payload, sink, timeout_s, request_id
        raise self._failures.pop(0)

    async def warm(self, connections: int) -> None:
        del connections


def records_of(failures: list[BaseException]) -> list[dict[str, Any]]:
    written: list[dict[str, Any]] = []
    items = [Item("a b c", 3, 4)]
    generator = LoadGenerator(
        FailingSender(list(failures)),
        items,
        [b"{}"],
        RuleCounter("whitespace"),
        written.append,
        Options(timeout_s=7.0),
    )
    stage = Stage("s", concurrency=1, duration_s=None, max_requests=len(failures))
    asyncio.run(generator.run(stage))
    return sorted(written, key=lambda r: r["n"])


def test_each_failure_is_recorded_with_its_type_s_kind_whatever_its_words() -> None:
    failures: list[BaseException] = [
        ConnectError("the peer said no"),  # no "cannot connect" in it
        ConnectTimeout("still dialling"),
        ReadTimeout("too slow"),
        RemoteProtocolError("cannot connect to the garbled answer"),  # the words lie
        OSError("broken pipe"),
    ]
    records = records_of(failures)
    assert [r["error_kind"] for r in records] == [
        "connect",
        "connect",
        "timeout",
        "protocol",
        "protocol",
    ]
    assert records[0]["error"] == "the peer said no"
    assert records[2]["error"] == "timeout after 7 s"
    assert {r["error_by"] for r in records} == {"client"}


def test_the_server_is_down_when_every_request_could_not_connect() -> None:
    records = records_of([ConnectError("the peer said no"), ConnectTimeout("still dialling")])
    endpoint = Endpoint("http://127.0.0.1:9")
    with pytest.raises(InfrastructureError, match="failed to connect: the peer said no"):
        _raise_if_down(records, endpoint)


@pytest.mark.parametrize(
    "failures",
    [
        # the message says "cannot connect", the type says the server answered badly
        [RemoteProtocolError("cannot connect to x: closed mid-response")] * 2,
        [ConnectError("cannot connect to x"), ReadTimeout("cannot connect to x")],
    ],
    ids=["protocol-errors", "one-timeout"],
)
def test_the_server_is_not_down_when_a_failure_is_of_another_kind(
    failures: list[HttpClientError],
) -> None:
    records = records_of(list(failures))
    _raise_if_down(records, Endpoint("http://127.0.0.1:9"))  # no error: not the down case
