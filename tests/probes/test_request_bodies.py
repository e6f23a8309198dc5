"""The bytes every probe sends, pinned: load (prompts, sessions), A/B and correctness, for
each API they speak, streamed and not, with and without extra body fields.

``request_bodies.json`` was written from the probes as they were before the request bodies
moved into one object per API (issue 34); this test holds them to it, byte for byte. Where
the one object unified an accidental difference between probes, the pin says so in
:data:`CHANGED` and the test checks exactly that change, nothing more.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from testbed.clients.apis import APIS
from testbed.clients.http import ConnectionPool
from testbed.clients.tgis import TgisPool
from testbed.probes.ab.prompts import Prompt
from testbed.probes.ab.traffic import Target
from testbed.probes.correctness import exchange
from testbed.probes.correctness.cases import RequestSpec
from testbed.probes.load import dataset, runner
from testbed.probes.load.session_runner import LiveSession, TurnEncoder
from testbed.probes.load.sessions import Conversation, Turn

PINNED = Path(__file__).with_name("request_bodies.json")

#: load.extra_body and a dataset row's own, in each API's words
LOAD_EXTRA: dict[str, dict[str, Any]] = {
    "tgi": {"top_k": 5},
    "tgis": {"sampling": {"temperature": 0.5}, "decoding": {"repetition_penalty": 1.1}},
}
ROW_EXTRA: dict[str, dict[str, Any]] = {"tgi": {"top_k": 6}, "tgis": {"sampling": {"top_k": 3}}}
OPENAI_EXTRA = {"top_p": 0.9, "seed": 1}


class RecordingPool(ConnectionPool):
    """An HTTP pool that keeps what it is asked to send and answers nothing."""

    def __init__(self) -> None:
        super().__init__("http://server:8000", headers={"X-Fixed": "f"})
        self.sent: list[bytes] = []

    async def send(
        self,
        payload: bytes,
        sink: Any,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> int:
        self.sent.append(payload)
        return 0


class RecordingChannel(TgisPool):
    """A gRPC channel that keeps what it is asked to send and answers nothing."""

    def __init__(self) -> None:  # no channel: nothing is sent
        self.sent: list[bytes] = []

    async def send(
        self,
        payload: bytes,
        sink: Any,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> int:
        self.sent.append(payload)
        return 0


def _shown(payload: bytes, api: str) -> str:
    return payload.hex() if api == "tgis" else payload.decode("latin-1")


def load_bodies() -> dict[str, Any]:
    out: dict[str, Any] = {}
    pool = RecordingPool()
    for api in ("completions", "chat", "responses", "embeddings", "tgi", "tgis"):
        Item = dataset.Item
        items = [Item("Say hello", 3, 5)]
        extra = ROW_EXTRA.get(api, {"seed": 2})
        if api == "embeddings":
            items = [
                Item("a", 2, 0, inputs=("a", "b"), extra_body={"dimensions": 8}),
                Item("c", 1, 0, model="e2", inputs=("c",)),
            ]
        elif api == "tgis":
            items.append(Item("Row two", 2, 7, model="m2", extra_body=extra))
        else:
            model = None if api == "tgi" else "m2"
            items.append(
                Item("Row two", 2, 7, model=model, headers={"X-Row": "r"}, extra_body=extra)
            )
        for stream in (True, False):
            for eos in (True, False):
                for given in (None, LOAD_EXTRA.get(api, OPENAI_EXTRA)):
                    payloads = dataset.encode(
                        items,
                        pool,
                        api=APIS[api],
                        model="m",
                        stream=stream,
                        ignore_eos=eos,
                        extra_body=given,
                    )
                    key = f"load/{api}/stream={stream}/eos={eos}/extra={given is not None}"
                    out[key] = [_shown(p, api) for p in payloads]
        out[f"load/{api}/limits"] = [repr(runner._limits(APIS[api], i)) for i in items]
    return out


def session_bodies() -> dict[str, Any]:
    out: dict[str, Any] = {}
    pool = RecordingPool()
    talk = Conversation((Turn("Hello there", 2, 4), Turn("And then?", 3, 6)))
    for api in ("completions", "chat", "tgi", "tgis"):
        for models in (None, ["m1"]):
            encoder = TurnEncoder(
                pool,
                api=APIS[api],
                model="m",
                stream=True,
                ignore_eos=True,
                extra_body=LOAD_EXTRA.get(api, OPENAI_EXTRA),
                models=models,
            )
            live = LiveSession(0, 0, talk)
            sent = []
            for answer in ("Hi!", None):
                item, payload = encoder.next_request(live)
                sent.append([_shown(payload, api), item.input_tokens, item.model])
                if answer is not None:
                    encoder.answered(live, item, answer, 2)
            out[f"sessions/{api}/models={models}"] = sent
    return out


AB_PROMPTS = [
    Prompt("text", text="Name a colour."),
    Prompt(
        "chat",
        messages=(
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name a fruit."},
        ),
    ),
    Prompt("long", text="Count to ten.", max_tokens=40),
]


def ab_bodies() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for api in ("completions", "chat", "tgi", "tgis"):
        for temperature in (0.0, 0.7):
            for extra in ({}, ROW_EXTRA.get(api, {"top_p": 0.9})):
                pool: Any = RecordingChannel() if api == "tgis" else RecordingPool()
                target = Target(
                    "stable", "d", pool, "m", api, 16, temperature, 5.0, extra_body=extra
                )  # type: ignore[arg-type]
                for prompt in AB_PROMPTS:
                    asyncio.run(target.send(prompt))
                key = f"ab/{api}/temperature={temperature}/extra={bool(extra)}"
                out[key] = [_shown(p, api) for p in pool.sent]
    return out


SPECS = {
    "plain": {"prompt": "alpha", "max_new_tokens": 4},
    "sampled": {
        "prompt": "beta",
        "max_new_tokens": 4,
        "temperature": 0.5,
        "seed": 7,
        "top_p": 0.9,
        "top_k": 5,
        "stop": ["x"],
        "logprobs": 2,
        "ignore_eos": True,
        "extra": {"repetition_penalty": 1.2},
    },
    "bare": {"prompt": "gamma", "logprobs": 0, "ignore_eos": False, "extra": {"temperature": 2}},
    "chat": {
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        "max_new_tokens": 3,
        "logprobs": 1,
        "ignore_eos": False,
    },
}


def correctness_bodies() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in SPECS.items():
        spec = RequestSpec.model_validate(raw)
        for protocol in ("openai", "tgi", "tgis"):
            if spec.chat and protocol != "openai":
                continue
            for model in ("m", ""):
                logprobs = spec.logprobs
                api = exchange.api_of(protocol, spec)
                body = exchange.build_body(api, spec, model, logprobs)
                sent = []
                for stream in (False, True):
                    pool: Any = RecordingChannel() if protocol == "tgis" else RecordingPool()
                    done = asyncio.run(exchange.send(pool, api, body, stream=stream, timeout_s=5.0))
                    sent.append(_shown(pool.sent[0], protocol))
                    assert done.body == body
                key = f"correctness/{name}/{protocol}/model={model or None}"
                out[key] = {"body": json.dumps(body), "sent": sent}
    return out


def every_body() -> dict[str, Any]:
    return {**load_bodies(), **session_bodies(), **ab_bodies(), **correctness_bodies()}


def _greedy_unsaid(body: dict[str, Any]) -> dict[str, Any]:
    """A correctness body as the API objects write it: greedy decoding (TGI's and TGIS's
    default) is not stated, and TGI's ``details`` are asked on the wire, not in the body."""
    out: dict[str, Any] = json.loads(json.dumps(body))
    parameters = out.get("parameters", {})
    if parameters.get("do_sample") is False:
        del parameters["do_sample"]
    if out.get("params", {}).get("method") == "GREEDY":
        del out["params"]["method"]
    return out


def _unsized(head: str) -> list[str]:
    return [line for line in head.split("\r\n") if not line.startswith("Content-Length")]


def _same_http_request(now: str, pinned: str) -> None:
    """The same request line and headers (bar the body's length) and the same JSON body."""
    (head, body), (old_head, old_body) = now.split("\r\n\r\n"), pinned.split("\r\n\r\n")
    assert _unsized(head) == _unsized(old_head)
    assert json.loads(body) == _greedy_unsaid(json.loads(old_body))


#: What the one object per API changed, deliberately: the correctness probe's bodies are
#: written in the order (and with the defaults) the load and A/B probes always used — the
#: same fields and values, greedy left to TGI's and TGIS's default. TGIS's wire bytes are
#: the same (protobuf writes fields by number, and GREEDY is the enum's zero).
CHANGED = "correctness/"


def test_every_probe_sends_the_pinned_bytes() -> None:
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    now = every_body()
    assert sorted(now) == sorted(pinned)
    for key, value in pinned.items():
        if not key.startswith(CHANGED):
            assert now[key] == value, key
            continue
        old_body = _greedy_unsaid(json.loads(value["body"]))
        old_body.get("parameters", {}).pop("details", None)
        assert json.loads(now[key]["body"]) == old_body, key
        for sent, old in zip(now[key]["sent"], value["sent"], strict=True):
            if "/tgis/" in key:
                assert sent == old, key
            else:
                _same_http_request(sent, old)
