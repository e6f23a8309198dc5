"""A correctness request that got no answer fails with the client's own exception type —
its kind kept, not flattened into one probe exception with the message as its only trace —
and an answer cut short by a server that then takes no connection is a connect error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from testbed.clients.apis import APIS
from testbed.clients.http import BodySink, ConnectionPool
from testbed.clients.http_errors import (
    ConnectError,
    HttpClientError,
    ReadTimeout,
    RemoteProtocolError,
)
from testbed.probes.correctness.exchange import send

BODY = {"model": "m", "prompt": "hi", "max_tokens": 4}


class FailingPool(ConnectionPool):
    """A pool whose request fails with ``failure`` (or, when None, whose answer's head
    arrives and then the connection ends), and whose server then answers no new request."""

    def __init__(self, failure: HttpClientError | None) -> None:
        super().__init__("http://127.0.0.1:9")
        self.failure = failure

    async def send(
        self, payload: bytes, sink: BodySink, timeout_s: float | None = None, request_id: Any = None
    ) -> int:
        del payload, timeout_s, request_id
        if self.failure is not None:
            raise self.failure
        sink.on_sent(1)
        sink.on_head(200, {"content-type": "text/event-stream"}, 2)
        sink.on_cut("the connection closed", 3)
        return 1

    async def reachable(self, timeout_s: float = 2.0) -> bool:
        del timeout_s
        return False


def exchange(pool: ConnectionPool) -> None:
    asyncio.run(send(pool, APIS["completions"], BODY, stream=True, timeout_s=3.0))


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (ConnectError("the peer said no"), "connect"),
        (RemoteProtocolError("cannot connect, says the garbled head"), "protocol"),
    ],
)
def test_no_answer_is_the_client_s_exception_of_its_kind(
    failure: HttpClientError, kind: str
) -> None:
    with pytest.raises(type(failure)) as raised:
        exchange(FailingPool(failure))
    assert raised.value is failure
    assert raised.value.kind == kind


def test_a_timeout_stays_a_timeout_and_names_its_setting() -> None:
    with pytest.raises(ReadTimeout, match=r"within 3 s \(timeout_s\)") as raised:
        exchange(FailingPool(ReadTimeout("no complete answer within 3 s")))
    assert raised.value.kind == "timeout"


def test_an_answer_cut_short_by_a_server_that_went_away_is_a_connect_error() -> None:
    with pytest.raises(ConnectError, match="the server went away"):
        exchange(FailingPool(None))
