"""One object per API: bodies from a neutral request, extra fields merged where the API
keeps them, wire bytes, and a sink that reads the API's own answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any, get_args

import pytest

from testbed.clients.apis import APIS, Request, of_protocol
from testbed.clients.counts import Limits
from testbed.clients.embeddings import Expect
from testbed.clients.http import ConnectionPool
from testbed.config.ab import AbProbe
from testbed.config.load import LoadProbe

ASK = Request("Hi", model="m", max_tokens=5)


def test_every_api_a_probe_names_has_its_object() -> None:
    for model in (LoadProbe, AbProbe):
        names = get_args(model.model_fields["api"].annotation)
        assert set(names) <= set(APIS), model.__name__
    assert {api.name for api in APIS.values()} == set(APIS)


def test_a_field_left_unset_is_not_sent() -> None:
    bodies = {name: api.body(Request("Hi", model="m")) for name, api in APIS.items()}
    assert bodies["completions"] == {"model": "m", "prompt": "Hi"}
    assert bodies["chat"] == {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    assert bodies["tgi"] == {"inputs": "Hi", "parameters": {}}
    assert bodies["tgis"] == {"model_id": "m", "requests": [{"text": "Hi"}], "params": {}}
    assert bodies["embeddings"] == {"model": "m", "input": ["Hi"]}
    assert bodies["responses"] == {"model": "m", "input": "Hi", "store": False}


@pytest.mark.parametrize("name", ["completions", "chat"])
def test_openai_states_greedy_which_is_not_its_default(name: str) -> None:
    body = APIS[name].body(Request("Hi", model="m", max_tokens=5, temperature=0.0))
    assert list(body)[:3] == ["model", "max_tokens", "temperature"]
    assert body["temperature"] == 0.0


def test_tgi_and_tgis_are_told_only_of_sampling() -> None:
    greedy = Request("Hi", model="m", max_tokens=5, temperature=0.0, seed=3, top_k=4)
    tgi, tgis = APIS["tgi"], APIS["tgis"]
    assert tgi.body(greedy)["parameters"] == {"max_new_tokens": 5, "seed": 3, "top_k": 4}
    # greedy decoding reads no sampling fields: TGIS gets none
    assert tgis.body(greedy)["params"] == {"stopping": {"max_new_tokens": 5}}
    sampled = Request("Hi", model="m", max_tokens=5, temperature=0.7, seed=3)
    assert tgi.body(sampled)["parameters"] == {
        "max_new_tokens": 5,
        "do_sample": True,
        "temperature": 0.7,
        "seed": 3,
    }
    params = tgis.body(sampled)["params"]
    assert params["method"] == "SAMPLE"
    assert params["sampling"] == {"temperature": 0.7, "seed": 3}


def test_ignore_eos_in_each_api_s_words() -> None:
    exact = Request("Hi", model="m", max_tokens=5, ignore_eos=True)
    assert APIS["completions"].body(exact)["ignore_eos"] is True
    assert APIS["responses"].body(exact)["ignore_eos"] is True
    assert APIS["tgis"].body(exact)["params"]["stopping"] == {
        "max_new_tokens": 5,
        "min_new_tokens": 5,
    }
    # a request that states it sends it to TGI (the simulator's extension)...
    assert APIS["tgi"].body(exact)["parameters"]["ignore_eos"] is True
    # ...but TGI has no way of its own, which a load asks before it states it
    assert [name for name, api in APIS.items() if not api.exact_lengths] == ["embeddings", "tgi"]


def test_logprobs_as_each_api_asks_them() -> None:
    ask = Request("Hi", model="m", logprobs=0)
    assert APIS["completions"].body(ask)["logprobs"] == 0
    chat = APIS["chat"].body(ask)
    assert (chat["logprobs"], chat["top_logprobs"]) == (True, 0)
    assert "top_n_tokens" not in APIS["tgi"].body(ask)["parameters"]  # 0: TGI's default
    assert APIS["tgis"].body(ask)["params"]["response"]["top_n_tokens"] == 0


def test_a_request_s_extra_uses_tgi_names_that_tgis_places() -> None:
    ask = Request("Hi", model="m", extra={"temperature": 0.5, "truncate_input_tokens": 9})
    params = APIS["tgis"].body(ask)["params"]
    assert params == {
        "sampling": {"temperature": 0.5},
        "method": "SAMPLE",
        "truncate_input_tokens": 9,
    }
    assert APIS["tgi"].body(ask)["parameters"]["temperature"] == 0.5
    assert APIS["chat"].body(ask)["truncate_input_tokens"] == 9


def test_extra_body_merges_where_the_api_keeps_its_fields() -> None:
    top = APIS["completions"].merge(APIS["completions"].body(ASK), {"seed": 1}, {"seed": 2})
    assert top["seed"] == 2
    tgi = APIS["tgi"].merge(APIS["tgi"].body(ASK), {"top_k": 5})
    assert tgi["parameters"] == {"max_new_tokens": 5, "top_k": 5}
    tgis = APIS["tgis"].merge(
        APIS["tgis"].body(ASK), {"stopping": {"min_new_tokens": 2}}, {"sampling": {"top_k": 3}}
    )
    assert tgis["params"] == {
        "stopping": {"max_new_tokens": 5, "min_new_tokens": 2},
        "sampling": {"top_k": 3},
    }
    body = APIS["tgis"].body(ASK)
    assert APIS["tgis"].merge(body, {}) is body  # nothing to merge: the body itself


def test_encoding_needs_a_pool_only_over_http() -> None:
    pool = ConnectionPool("http://server:8000")
    wire = APIS["chat"].encode(pool, APIS["chat"].body(ASK), stream=True)
    head, body = wire.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1")
    assert json.loads(body)["stream_options"] == {"include_usage": True}
    assert (
        APIS["embeddings"]
        .encode(pool, {"model": "m", "input": ["a"]}, stream=True)
        .endswith(
            b'{"model":"m","input":["a"]}'  # one body, never streamed
        )
    )
    assert APIS["tgis"].encode(None, APIS["tgis"].body(ASK), stream=False)  # protobuf bytes
    with pytest.raises(TypeError, match="HTTP pool"):
        APIS["tgi"].encode(None, APIS["tgi"].body(ASK), stream=True)


def test_limits_come_from_each_api_s_own_field() -> None:
    for name in ("completions", "chat", "responses", "tgi", "tgis"):
        api = APIS[name]
        assert api.limits_of(api.body(ASK)) == Limits(5), name
    embeds = APIS["embeddings"]
    batch = embeds.merge(embeds.body(Request(inputs=("a", "b"), model="m")), {"dimensions": 8})
    assert embeds.limits_of(batch) == Expect(2, 8)


def test_of_protocol_picks_openai_s_api_by_the_request_s_shape() -> None:
    assert of_protocol("openai", chat=True) is APIS["chat"]
    assert of_protocol("openai", chat=False) is APIS["completions"]
    assert of_protocol("tgis", chat=False) is APIS["tgis"]
    assert {api.protocol for api in APIS.values()} == {"openai", "tgi", "tgis"}


class CannedPool(ConnectionPool):
    """Answers every request with one HTTP body, fed to the sink as a server would."""

    def __init__(self, content_type: str, body: bytes) -> None:
        super().__init__("http://server:8000")
        self.answer, self.kind = body, content_type
        self.sent: list[bytes] = []

    async def send(
        self,
        payload: bytes,
        sink: Any,
        timeout_s: float | None = None,
        request_id: str | None = None,
    ) -> int:
        self.sent.append(payload)
        sink.on_sent(1)
        sink.on_head(200, {"content-type": self.kind}, 2)
        sink.on_data(self.answer, 3)
        sink.on_end(4)
        return 1


def test_send_reads_the_answer_with_the_api_s_own_sink() -> None:
    stream = b'data:{"token":{"text":"yo","special":false}}\n\ndata:{"token":{"text":"!","special":false},"generated_text":"yo!","details":{"finish_reason":"length","generated_tokens":2}}\n\n'  # noqa: E501
    pool = CannedPool("text/event-stream", stream)
    response = asyncio.run(APIS["tgi"].send(pool, APIS["tgi"].body(ASK)))
    assert (response.text, response.finish_reason, response.error) == ("yo!", "length", None)
    assert pool.sent[0].startswith(b"POST /generate_stream ")
    # the request's limits go with it: a count over max_tokens is the server's error
    lying = stream.replace(b'"generated_tokens":2', b'"generated_tokens":9')
    pool = CannedPool("text/event-stream", lying)
    response = asyncio.run(APIS["tgi"].send(pool, APIS["tgi"].body(ASK)))
    assert response.error is not None
    assert "9" in response.error
