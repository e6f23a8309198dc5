"""A server's word is checked, not trusted (issue 32): answers that end properly but claim
what cannot be true are the response's error, in words a person can read.

Each protocol client against the scripted server (tests/fixtures/scripted.py): usage counts
over the request's limit, negative, not whole numbers, not adding up, fewer than the chunks
that arrived; error objects at the top level or without a message; content after the finish
reason; events after the end; a choice the request did not ask for. What a correct server
does is the control each time (a ``length`` finish before ``max_tokens``, a null count, an
``object`` label of the wrong kind, ``n`` choices' summed counts): still ok.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from testbed.clients import openai, tgi, tgis
from testbed.clients.http import ConnectionPool
from testbed.clients.response import Response
from tests.fixtures.scripted import (
    Answer,
    ScriptedServer,
    choice,
    openai_body,
    openai_stream,
    scripted_server,
    tgi_stream,
    usage,
)

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with scripted_server(grpc=True) as scripted:
        yield scripted


def ask(server: ScriptedServer, api: str, *, stream: bool = True, **request: Any) -> Response:
    """One request of ``api`` (``max_tokens`` 8 unless given) through the protocol client."""

    async def main() -> Response:
        pool = ConnectionPool(server.url)
        try:
            body: dict[str, Any] = {"model": "m", "max_tokens": 8, **request}
            if api == "tgi":
                body = {"inputs": "hi", "parameters": {"max_new_tokens": 8}}
                return await tgi.generate(pool, body, stream=stream, timeout_s=10)
            body["prompt" if api == "completions" else "messages"] = "hi"
            chosen: openai.Api = "chat" if api == "chat" else "completions"
            return await openai.complete(pool, body, api=chosen, stream=stream, timeout_s=10)
        finally:
            await pool.aclose()

    return asyncio.run(main())


def answering(counts: Any, n: int = 8, **options: Any) -> Callable[[str, Any], Answer]:
    """A script: ``n`` words, counted as ``counts`` says, streamed and unary alike."""

    def script(path: str, _request: Any) -> Answer:
        return Answer(openai_stream(path, n, counts, **options), openai_body(path, n, counts))

    return script


LIES = {
    "over max_tokens": (
        usage(4, 800),
        "usage.completion_tokens 800 is over the request's max_tokens 8",
    ),
    "negative": (usage(4, -5), "usage.completion_tokens -5 is not a count of tokens"),
    "a string": (usage(4, "8", 12), 'usage.completion_tokens "8" is not a count of tokens'),
    "a bool": (usage(4, True, 5), "usage.completion_tokens true is not a count of tokens"),
    "a float": (usage(4, 8.0, 12), "usage.completion_tokens 8.0 is not a count of tokens"),
    "a negative prompt": (usage(-1, 8), "usage.prompt_tokens -1 is not a count of tokens"),
    "a total that does not add up": (
        usage(4, 8, 99),
        "usage.total_tokens 99 is not prompt_tokens + completion_tokens (4 + 8)",
    ),
    "fewer than the chunks": (
        usage(4, 3),
        "usage.completion_tokens 3 is fewer than the 8 text chunks that arrived",
    ),
    "not an object": ([4, 8], "usage is not an object of counts: [4, 8]"),
}


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("lie", sorted(LIES))
def test_counts_that_cannot_be_true_are_the_servers_error(
    server: ScriptedServer, api: str, lie: str
) -> None:
    counts, words = LIES[lie]
    server.script = answering(counts)
    response = ask(server, api)
    assert response.status == 200
    assert response.text == " w0 w1 w2 w3 w4 w5 w6 w7"  # what arrived is kept
    assert not response.ok
    assert response.error is not None
    assert response.error.startswith(words), response.error


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("lie", ["over max_tokens", "a string", "negative", "not an object"])
def test_a_unary_answers_counts_are_checked_too(server: ScriptedServer, api: str, lie: str) -> None:
    counts, words = LIES[lie]
    server.script = answering(counts)
    response = ask(server, api, stream=False)
    assert response.error is not None
    assert response.error.startswith(words.replace("8 text chunks", "1 text chunk"))


def test_a_unary_answer_with_text_and_no_tokens_is_refused(server: ScriptedServer) -> None:
    server.script = answering(usage(4, 0))
    response = ask(server, "completions", stream=False)
    assert response.error == (
        "usage.completion_tokens 0 is fewer than the 1 text chunk that arrived"
        " (each carries at least one token)"
    )


#: what a correct server does (ok), the lie next to it (refused), words, asked.
BORDERS: dict[str, tuple[Any, Any, int, str, dict[str, Any]]] = {
    "a length finish before max_tokens (the context window ended it)": (
        usage(4, 5),
        usage(4, 9),
        5,
        "usage.completion_tokens 9 is over the request's max_tokens 8",
        {},
    ),
    "a null completion_tokens (vLLM's UsageInfo allows it)": (
        usage(4, None, 4),
        usage(4, "", 4),
        8,
        'usage.completion_tokens "" is not a count of tokens',
        {},
    ),
    "no usage at all": (None, "8 tokens", 8, "usage is not an object of counts: 8 tokens", {}),
    "n choices' counts summed": (
        usage(4, 16),
        usage(4, 17),
        8,
        "usage.completion_tokens 17 is over the request's max_tokens 8 × 2 choices",
        {"n": 2},
    ),
    "max_completion_tokens before max_tokens": (
        usage(4, 12),
        usage(4, 13),
        8,
        "usage.completion_tokens 13 is over the request's max_tokens 12",
        {"max_completion_tokens": 12},
    ),
    "more tokens than chunks (several tokens in one chunk)": (
        usage(4, 8),
        usage(4, 2),
        3,
        "usage.completion_tokens 2 is fewer than the 3 text chunks that arrived",
        {},
    ),
}


@pytest.mark.parametrize("what", list(BORDERS))
def test_what_a_correct_server_does_stays_ok(server: ScriptedServer, what: str) -> None:
    """Each border: the correct server's answer passes, the lie just past it does not."""
    honest, lie, n, words, asked = BORDERS[what]
    server.script = answering(honest, n)
    response = ask(server, "completions", **asked)
    assert response.ok, (what, response.error)
    server.script = answering(lie, n)
    refused = ask(server, "completions", **asked).error or ""
    assert refused.startswith(words), (what, refused)


def test_a_wrong_object_label_is_not_refused_an_error_object_is(server: ScriptedServer) -> None:
    """Many compatible servers name ``object`` wrongly; nothing is read from it but
    ``"error"``, which marks an error object."""

    def labelled(kind: str) -> Callable[[str, Any], Answer]:
        def script(path: str, _request: Any) -> Answer:
            events = openai_stream(path, 8, usage(4, 8))
            for event in events[:-1]:
                event["object"] = kind  # a chunk's label on a completions stream
            if kind == "error":
                events.insert(3, {"object": kind, "message": "boom"})
            return Answer(events)

        return script

    server.script = labelled("chat.completion")
    assert ask(server, "completions").ok
    server.script = labelled("error")
    assert ask(server, "completions").error == "boom"


def stream_of(*events: Any) -> Callable[[str, Any], Answer]:
    def script(path: str, _request: Any) -> Answer:
        return Answer([e(path) if callable(e) else e for e in events])

    return script


def word(text: str, finish: str | None = None, index: int = 0) -> Callable[[str], Any]:
    return lambda path: {"choices": [choice(text, path, finish=finish, index=index)]}


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_an_error_object_at_the_top_level_is_the_servers_error(
    server: ScriptedServer, api: str
) -> None:
    """vLLM's streams sent their error this way before 0.10 (no ``error`` key around it)."""
    error = {"object": "error", "message": "KV cache exhausted", "type": "InternalServerError"}
    server.script = stream_of(word(" a"), {**error, "code": 500}, "[DONE]")
    response = ask(server, api)
    assert response.error == "KV cache exhausted (type InternalServerError, code 500)"


@pytest.mark.parametrize(
    "error",
    [
        {"error": {"message": "", "type": "InternalServerError", "code": 500}},
        {"error": {"message": "   ", "type": "InternalServerError", "code": 500}},
        {"message": "", "type": "InternalServerError", "code": 500},
    ],
)
def test_an_error_without_a_message_says_what_it_was(server: ScriptedServer, error: Any) -> None:
    server.script = stream_of(word(" a"), error, "[DONE]")
    response = ask(server, "completions")
    assert response.error == "an error without a message (type InternalServerError, code 500)"


def test_an_error_with_nothing_in_it_shows_the_object(server: ScriptedServer) -> None:
    server.script = stream_of(word(" a"), {"error": {"message": None, "param": "x"}}, "[DONE]")
    response = ask(server, "completions")
    assert response.error == 'an error without a message: {"message": null, "param": "x"}'


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_content_after_the_finish_reason_is_the_servers_error(
    server: ScriptedServer, api: str
) -> None:
    server.script = stream_of(word(" a"), word(" b", "stop"), word(" c"), "[DONE]")
    response = ask(server, api)
    assert response.error == "content after the chunk with finish_reason 'stop': ' c'"
    assert response.text == " a b c"  # what arrived is kept


def test_an_empty_chunk_after_the_finish_reason_is_fine_a_space_is_not(
    server: ScriptedServer,
) -> None:
    """vLLM's chat sends the finish reason with an empty delta, then the usage chunk."""
    server.script = stream_of(word(" a"), word("", "stop"), word(""), "[DONE]")
    assert ask(server, "chat").ok
    server.script = stream_of(word(" a"), word("", "stop"), word(" "), "[DONE]")
    assert ask(server, "chat").error == "content after the chunk with finish_reason 'stop': ' '"


@pytest.mark.parametrize(
    ("events", "words"),
    [
        (["[DONE]"], "a second data: [DONE] after data: [DONE], the end of the stream"),
        ([word(" late")], 'an event ({"choices": [{"index": 0, "text": " late"'),
    ],
)
def test_anything_after_done_is_the_servers_error(
    server: ScriptedServer, events: list[Any], words: str
) -> None:
    server.script = stream_of(word(" a", "stop"), "[DONE]", *events)
    response = ask(server, "completions")
    assert response.error is not None
    assert response.error.startswith(words), response.error


@pytest.mark.parametrize(
    ("index", "asked", "words"),
    [
        (1, {}, "a choice with index 1 in the answer to a request for 1 choice"),
        (2, {"n": 2}, "a choice with index 2 in the answer to a request for 2 choices"),
        ("0", {}, 'choice index "0" is not a whole number ≥ 0'),
        (-1, {}, "choice index -1 is not a whole number ≥ 0"),
    ],
)
def test_a_choice_the_request_did_not_ask_for_is_the_servers_error(
    server: ScriptedServer, index: Any, asked: dict[str, Any], words: str
) -> None:
    server.script = stream_of(word(" a", "stop"), word(" x", "stop", index), "[DONE]")
    response = ask(server, "completions", **asked)
    assert response.error == words
    assert response.text == " a"  # another choice's text is not this one's


def test_the_second_choice_of_n_2_is_read_apart(server: ScriptedServer) -> None:
    server.script = stream_of(
        word(" a"), word(" x", index=1), word(" b", "stop"), word(" y", "length", 1), "[DONE]"
    )
    response = ask(server, "completions", n=2)
    assert response.ok, response.error
    assert (response.text, response.finish_reason) == (" a b", "stop")


@pytest.mark.parametrize(
    ("event", "words"),
    [
        ({"choices": [{"text": 5}]}, "content 5 is not a string"),
        ({"choices": [{"delta": {"content": ["x"]}}]}, 'content ["x"] is not a string'),
        ({"choices": [{"text": "a", "finish_reason": True}]}, "finish_reason true is not a string"),
        ([1, 2], "not a completion chunk (JSON list): [1, 2]"),
    ],
)
def test_a_value_of_the_wrong_type_is_the_servers_error(
    server: ScriptedServer, event: Any, words: str
) -> None:
    server.script = stream_of(word(" a"), event, word(" b", "stop"), "[DONE]")
    assert ask(server, "completions").error == words


# -- TGI and TGIS ----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("generated", "words"),
    [
        (800, "usage.completion_tokens 800 is over the request's max_tokens 8"),
        (-5, "usage.completion_tokens -5 is not a count of tokens"),
        ("8", 'usage.completion_tokens "8" is not a count of tokens'),
    ],
)
def test_tgis_generated_tokens_are_checked(
    server: ScriptedServer, stream: bool, generated: Any, words: str
) -> None:
    def script(_path: str, _request: Any) -> Answer:
        events = tgi_stream(8, generated)
        return Answer(events, body=events[-1] | {"token": None})

    server.script = script
    response = ask(server, "tgi", stream=stream)
    assert response.error is not None
    assert response.error.startswith(words), response.error


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (
            {"error": "", "error_type": "generation"},
            "an error without a message (error_type generation)",
        ),
        (
            {"error": "out of memory", "error_type": "generation"},
            "out of memory (error_type generation)",
        ),
    ],
)
def test_a_tgi_error_event_reads_as_words(server: ScriptedServer, event: Any, words: str) -> None:
    server.script = lambda _p, _r: Answer([*tgi_stream(8, 8)[:3], event])
    assert ask(server, "tgi").error == words


def test_a_tgi_event_after_the_final_one_is_the_servers_error(server: ScriptedServer) -> None:
    server.script = lambda _p, _r: Answer([*tgi_stream(8, 8), tgi_stream(8, 8)[0]])
    response = ask(server, "tgi")
    assert response.error is not None
    assert response.error.startswith("an event ({"), response.error
    assert response.error.endswith(
        "after the final event (generated_text, details), the end of the stream"
    )


def send_tgis(server: ScriptedServer, *, stream: bool) -> Response:
    async def main() -> Response:
        pool = tgis.TgisPool(server.grpc_target)
        body = {"requests": [{"text": "hi"}], "params": {"stopping": {"max_new_tokens": 8}}}
        sink = tgis.sink(stream=stream, limits=tgis.limits_of(body))
        try:
            await pool.send(tgis.encode(body, stream=stream), sink, 10)
        finally:
            await pool.aclose()
        return sink.response

    return asyncio.run(main())


def tgis_messages(generated: int, texts: int = 8) -> Callable[[bool], list[dict[str, Any]]]:
    """A TGIS stream: the input count, ``texts`` words, the last claiming ``generated``."""

    def script(stream: bool) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [{"input_token_count": 4}]
        for i in range(texts):
            messages.append({"text": f" w{i}", "generated_token_count": i + 1})
        messages[-1] |= {"generated_token_count": generated, "stop_reason": 1}  # MAX_TOKENS
        if not stream:
            text = "".join(m.get("text", "") for m in messages)
            return [{**messages[-1], "input_token_count": 4, "text": text}]
        return messages

    return script


@pytest.mark.parametrize("stream", [True, False])
def test_tgis_generated_token_count_over_the_limit_is_the_servers_error(
    server: ScriptedServer, stream: bool
) -> None:
    server.tgis_script = tgis_messages(800)
    response = send_tgis(server, stream=stream)
    assert response.error == "usage.completion_tokens 800 is over the request's max_tokens 8"


def test_tgis_fewer_tokens_than_messages_is_the_servers_error(server: ScriptedServer) -> None:
    server.tgis_script = tgis_messages(3)
    response = send_tgis(server, stream=True)
    assert response.error == (
        "usage.completion_tokens 3 is fewer than the 8 text chunks that arrived"
        " (each carries at least one token)"
    )


@pytest.mark.parametrize("stream", [True, False])
def test_tgis_honest_counts_are_ok(server: ScriptedServer, stream: bool) -> None:
    server.tgis_script = tgis_messages(8)
    response = send_tgis(server, stream=stream)
    assert response.ok, response.error


def test_echo_adds_the_prompt_as_one_chunk(server: ScriptedServer) -> None:
    """With ``echo`` the prompt comes back as content first: one chunk no token made."""

    def echoed(completion: int) -> Callable[[str, Any], Answer]:
        def script(path: str, _request: Any) -> Answer:
            events = openai_stream(path, 8, usage(1, completion))
            return Answer([{"choices": [choice("hi", path)]}, *events])

        return script

    server.script = echoed(8)
    response = ask(server, "completions", echo=True)
    assert response.ok, response.error
    assert response.text == "hi w0 w1 w2 w3 w4 w5 w6 w7"
    server.script = echoed(7)
    assert ask(server, "completions", echo=True).error == (
        "usage.completion_tokens 7 is fewer than the 8 text chunks that arrived"
        " (each carries at least one token)"
    )
