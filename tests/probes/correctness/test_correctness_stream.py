"""Stream checks: well-formed chunks, monotone counts, exactly one final chunk."""

from __future__ import annotations

import json
from typing import Any

from testbed.probes.correctness.exchange import Exchange
from testbed.probes.correctness.outputs import Output, openai_output, tgi_output


def chunk(
    text: str | None = None, finish: str | None = None, usage: Any = None, cid: str = "c1"
) -> dict[str, Any]:
    choices = (
        []
        if text is None and finish is None
        else [{"index": 0, "text": text or "", "finish_reason": finish}]
    )
    return {"id": cid, "object": "text_completion", "choices": choices, "usage": usage}


def stream(protocol: str, events: list[Any], done: bool = True) -> Exchange:
    payloads = [e if isinstance(e, bytes) else json.dumps(e).encode() for e in events]
    if done:
        payloads.append(b"[DONE]")
    return Exchange(protocol, True, {}, Output(), 200, payloads)  # type: ignore[arg-type]


USAGE = {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
GOOD = [chunk(" a"), chunk(" b", "length"), chunk(usage=USAGE)]


def problems(exchange: Exchange) -> list[str]:
    from testbed.probes.correctness.stream_check import check_stream

    return check_stream(exchange)


def test_a_good_openai_stream_passes_and_merges() -> None:
    assert problems(stream("openai", GOOD)) == []
    merged = openai_output([json.loads(p) for p in stream("openai", GOOD).payloads[:-1]])
    assert (merged.text, merged.finish_reason, merged.completion_tokens) == (" a b", "length", 2)


def test_openai_stream_problems() -> None:
    assert "did not end with data: [DONE]" in problems(stream("openai", GOOD, done=False))[0]
    two_finals = [chunk(" a", "stop"), chunk(" b", "length"), chunk(usage=USAGE)]
    assert any(
        "2 chunks carry a finish_reason" in p for p in problems(stream("openai", two_finals))
    )
    no_usage = [chunk(" a"), chunk(" b", "length")]
    assert any("no chunk carries usage" in p for p in problems(stream("openai", no_usage)))
    down = [
        chunk(" a", usage={"completion_tokens": 2}),
        chunk(" b", "length", {"completion_tokens": 1}),
    ]
    assert any("went down" in p for p in problems(stream("openai", down)))
    broken = [GOOD[0], b'{"id": "c1", "choi', *GOOD[1:]]
    assert any("is not JSON" in p for p in problems(stream("openai", broken)))
    other_id = [GOOD[0], chunk(" b", "length", cid="c2"), GOOD[2]]
    assert any("different ids" in p for p in problems(stream("openai", other_id)))
    after = [*GOOD[:2], chunk(" c"), GOOD[2]]
    assert any("text after the final chunk" in p for p in problems(stream("openai", after)))
    too_many = [chunk(" a"), chunk(" b"), chunk(" c", "length"), chunk(usage=USAGE)]
    assert any(
        "3 text chunks but completion_tokens is 2" in p
        for p in problems(stream("openai", too_many))
    )
    cut = stream("openai", GOOD)
    cut.incomplete_tail = True
    assert any("inside an event" in p for p in problems(cut))


def tgi_event(index: int, text: str, last: bool = False, generated: int = 2) -> dict[str, Any]:
    return {
        "index": index,
        "token": {"id": index, "text": text, "logprob": -0.5, "special": False},
        "generated_text": " a b" if last else None,
        "details": {"finish_reason": "length", "generated_tokens": generated} if last else None,
    }


def test_tgi_streams() -> None:
    good = [tgi_event(0, " a"), tgi_event(1, " b", last=True)]
    assert problems(stream("tgi", good, done=False)) == []
    merged = tgi_output(good)
    assert (merged.text, merged.completion_tokens, merged.logprobs) == (" a b", 2, [-0.5, -0.5])
    back = [tgi_event(1, " a"), tgi_event(1, " b", last=True)]
    assert any("do not increase" in p for p in problems(stream("tgi", back, done=False)))
    early = [tgi_event(0, " a", last=True), tgi_event(1, " b")]
    assert any("not the last one" in p for p in problems(stream("tgi", early, done=False)))
    miscount = [tgi_event(0, " a"), tgi_event(1, " b", last=True, generated=5)]
    assert any("generated_tokens is 5" in p for p in problems(stream("tgi", miscount, done=False)))
