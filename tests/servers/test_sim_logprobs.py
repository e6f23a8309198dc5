"""The simulator's logprobs, read by the official OpenAI SDK: completions ``logprobs: k`` and
chat ``logprobs: true, top_logprobs: k``, whole and streamed, in vLLM's shapes."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from testbed.config.sim import SimParams
from testbed.servers.sim import serve_in_thread

PROMPT = "Say something about the sea"


@pytest.fixture(scope="module")
def client() -> Iterator[openai.OpenAI]:
    with serve_in_thread(SimParams(eos_rate=0.0)) as url:
        sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=10)
        try:
            yield sdk
        finally:
            sdk.close()


def _coherent(chosen: float, ranked: list[float]) -> None:
    """The generated token is the most probable; the list is sorted and sums to <= 1."""
    assert ranked[0] == chosen
    assert ranked == sorted(ranked, reverse=True)
    assert sum(math.exp(v) for v in ranked) <= 1.0 + 1e-9


def test_completions_logprobs_with_the_sdk(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="sim-model", prompt=PROMPT, max_tokens=5, logprobs=3, temperature=0
    )
    choice = reply.choices[0]
    lp = choice.logprobs
    assert lp is not None
    assert lp.tokens is not None
    assert "".join(lp.tokens) == choice.text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(5)]
    assert lp.top_logprobs is not None
    assert len(lp.top_logprobs) == 5
    assert lp.token_logprobs is not None
    for token, chosen, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert len(top) == 3
        assert token in top
        _coherent(chosen, list(top.values()))
    again = client.completions.create(model="sim-model", prompt=PROMPT, max_tokens=5, logprobs=3)
    assert again.choices[0].logprobs == lp  # deterministic


def test_completions_stream_carries_the_same_logprobs(client: openai.OpenAI) -> None:
    whole = client.completions.create(model="sim-model", prompt=PROMPT, max_tokens=4, logprobs=2)
    stream = client.completions.create(
        model="sim-model", prompt=PROMPT, max_tokens=4, logprobs=2, stream=True
    )
    tokens: list[str] = []
    offsets: list[int] = []
    tops: list[dict[str, float]] = []
    for chunk in stream:
        lp = chunk.choices[0].logprobs
        assert lp is not None
        assert lp.tokens
        assert lp.text_offset
        assert lp.top_logprobs
        tokens += lp.tokens
        offsets += lp.text_offset
        tops += lp.top_logprobs
    expected = whole.choices[0].logprobs
    assert expected is not None
    assert (tokens, offsets, tops) == (
        expected.tokens,
        expected.text_offset,
        expected.top_logprobs,
    )


def test_completions_without_logprobs_have_none(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="sim-model", prompt=PROMPT, max_tokens=3)
    assert reply.choices[0].logprobs is None


@pytest.mark.parametrize("top", [0, 4])
def test_chat_logprobs_with_the_sdk(client: openai.OpenAI, top: int) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    reply = client.chat.completions.create(
        model="sim-model", messages=messages, max_tokens=4, logprobs=True, top_logprobs=top
    )
    choice = reply.choices[0]
    assert choice.logprobs is not None
    assert choice.logprobs.content is not None
    content = choice.logprobs.content
    assert "".join(c.token for c in content) == choice.message.content
    for entry in content:
        assert entry.bytes == list(entry.token.encode())
        assert len(entry.top_logprobs) == top
        if top:
            assert entry.top_logprobs[0].token == entry.token
            _coherent(entry.logprob, [t.logprob for t in entry.top_logprobs])


def test_chat_stream_logprobs_per_token(client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    stream = client.chat.completions.create(
        model="sim-model",
        messages=messages,
        max_tokens=3,
        logprobs=True,
        top_logprobs=2,
        stream=True,
    )
    text, tokens = "", []
    for chunk in stream:
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        if choice.logprobs is not None and choice.logprobs.content:
            tokens += [c.token for c in choice.logprobs.content]
            assert len(choice.logprobs.content[0].top_logprobs) == 2
    assert len(tokens) == 3
    assert "".join(tokens) == text


def test_bad_logprobs_requests_are_400(client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    with pytest.raises(openai.BadRequestError, match="top_logprobs' needs 'logprobs': true"):
        client.chat.completions.create(model="sim-model", messages=messages, top_logprobs=2)
    with pytest.raises(openai.BadRequestError, match="'logprobs' must be at most 20"):
        client.completions.create(model="sim-model", prompt=PROMPT, logprobs=21)
