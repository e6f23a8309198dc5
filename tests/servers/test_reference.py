"""The reference server with the real bundled model, over HTTP.

One server process (one model load) serves every test here and the other modules that need
it: the session's ``reference_server`` (tests/fixtures/servers.py), started by the local
backend as ``testbed serve hf``; at the end of the session it must stop cleanly on SIGTERM.
"""

from __future__ import annotations

import http.client
import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from testbed.execution.single import Provisioned

pytestmark = [pytest.mark.reference, pytest.mark.slow]

MODEL = "smollm2-135m"
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time",
    "1, 2, 3, 4,",
    "The best way to learn Python is",
    "Water boils at",
]


class Server:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            conn.request(method, path, body=data if body is not None else None)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def post(self, path: str, body: Any) -> Any:
        status, data = self.request("POST", path, body)
        assert status == 200, data
        return json.loads(data)

    def events(self, path: str, body: Any) -> list[Any]:
        """The ``data:`` payloads of a streamed answer, ``[DONE]`` included, as parsed JSON."""
        status, data = self.request("POST", path, body)
        assert status == 200, data
        out = []
        for block in data.decode().split("\n\n"):
            if block.startswith("data: "):
                payload = block.removeprefix("data: ")
                out.append(payload if payload == "[DONE]" else json.loads(payload))
        return out

    def complete(self, prompt: str, **fields: Any) -> Any:
        body = {"model": MODEL, "prompt": prompt, "temperature": 0, **fields}
        return self.post("/v1/completions", body)["choices"][0]

    def batch_histogram_count(self) -> dict[str, int]:
        status, data = self.request("GET", "/metrics")
        assert status == 200
        pattern = r'testbed:decode_batch_size_bucket\{model_name="[^"]+",le="([^"]+)"\} (\d+)'
        return {le: int(n) for le, n in re.findall(pattern, data.decode())}


@pytest.fixture
def server(reference_server: Provisioned) -> Server:
    """The session's reference server (one model load for every test that needs one)."""
    address = reference_server.handle.endpoint.base_url.removeprefix("http://")
    host, port = address.rsplit(":", 1)
    return Server(host, int(port))


def test_greedy_output_is_identical_alone_and_in_a_batch(server: Server) -> None:
    def run(prompt: str) -> tuple[str, list[float]]:
        choice = server.complete(prompt, max_tokens=12, logprobs=1)
        return choice["text"], choice["logprobs"]["token_logprobs"]

    alone = [run(p) for p in PROMPTS]
    before = server.batch_histogram_count()
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(run, PROMPTS))
    after = server.batch_histogram_count()
    assert together == alone  # texts and logprobs, bit for bit
    assert alone[0][0].startswith(" Paris")
    # Some decode steps ran with more than one row: the requests were batched.
    assert after["+Inf"] - after["1.0"] > before["+Inf"] - before["1.0"]


def test_a_request_joins_a_running_batch(server: Server) -> None:
    """A short request sent while a long one streams finishes first, with its alone output."""
    short_alone = server.complete(PROMPTS[2], max_tokens=4)["text"]
    body = {"model": MODEL, "prompt": PROMPTS[0], "max_tokens": 48, "temperature": 0,
            "stream": True, "ignore_eos": True}  # fmt: skip
    conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps(body))
    response = conn.getresponse()
    assert response.status == 200
    response.readline()  # the first event of the long request: it is running
    short = server.complete(PROMPTS[2], max_tokens=4)["text"]
    rest = response.read().decode()  # the long request was still streaming after that
    conn.close()
    assert short == short_alone
    assert rest.count('"text"') > 20
    assert rest.rstrip().endswith("data: [DONE]")


def test_completion_logprobs_are_in_openai_format(server: Server) -> None:
    choice = server.complete(PROMPTS[0], max_tokens=5, logprobs=3)
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 5
    assert "".join(lp["tokens"]) == choice["text"]
    for token, logprob, top in zip(
        lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True
    ):
        assert len(top) == 3
        assert logprob <= 0
        assert max(top.values()) == pytest.approx(logprob)  # greedy picks the most likely
        assert top[token] == pytest.approx(logprob)
    assert lp["text_offset"][0] == 0
    assert choice["finish_reason"] == "length"


def test_chat_stream_with_usage_matches_the_whole_answer(server: Server) -> None:
    question = [{"role": "user", "content": "What is the capital of France?"}]
    body = {"model": MODEL, "messages": question,
            "max_tokens": 8, "temperature": 0, "logprobs": True, "top_logprobs": 2}  # fmt: skip
    whole = server.post("/v1/chat/completions", body)
    message = whole["choices"][0]["message"]
    assert message["role"] == "assistant"
    content = whole["choices"][0]["logprobs"]["content"]
    assert len(content) == whole["usage"]["completion_tokens"]
    assert all(len(c["top_logprobs"]) == 2 for c in content)
    events = server.events(
        "/v1/chat/completions", body | {"stream": True, "stream_options": {"include_usage": True}}
    )
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    usage = events[-2]
    assert usage["choices"] == []
    assert usage["usage"] == whole["usage"]
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-2])
    assert text == message["content"]
    assert events[-3]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_tgi_generate_and_stream_agree_with_openai(server: Server) -> None:
    params = {"max_new_tokens": 6, "details": True, "top_n_tokens": 2}
    answer = server.post("/generate", {"inputs": PROMPTS[0], "parameters": params})
    assert answer["generated_text"] == server.complete(PROMPTS[0], max_tokens=6)["text"]
    details = answer["details"]
    assert details["finish_reason"] == "length"
    assert details["generated_tokens"] == len(details["tokens"]) == 6
    assert all(len(t) == 2 for t in details["top_tokens"])
    events = server.events("/generate_stream", {"inputs": PROMPTS[0], "parameters": params})
    assert [e["token"]["id"] for e in events] == [t["id"] for t in details["tokens"]]
    assert events[-1]["generated_text"] == answer["generated_text"]
    assert events[-1]["details"]["generated_tokens"] == 6
    assert all(e["generated_text"] is None for e in events[:-1])


def test_stop_strings_and_seeded_sampling(server: Server) -> None:
    stopped = server.complete(PROMPTS[0], max_tokens=12, stop=["."])
    assert stopped["text"] == " Paris"
    assert stopped["finish_reason"] == "stop"
    sampled = [
        server.complete(PROMPTS[2], max_tokens=10, temperature=0.9, seed=42)["text"]
        for _ in range(2)
    ]
    assert sampled[0] == sampled[1]
    details = server.post(
        "/generate",
        {
            "inputs": PROMPTS[0],
            "parameters": {"max_new_tokens": 12, "stop": ["."], "details": True},
        },
    )["details"]
    assert details["finish_reason"] == "stop_sequence"


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/v1/completions", {"model": "other", "prompt": "x"}, 404, "does not exist"),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 9000}, 400, "context"),
        (
            "/v1/completions",
            {"model": MODEL, "prompt": "x", "max_tokens": 9000, "stream": True},
            400,
            "context",
        ),
        ("/v1/completions", b"{not json", 400, ""),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "n": 2}, 400, "n > 1"),
        ("/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages"),
        ("/generate", {"parameters": {}}, 422, "inputs"),
        ("/nowhere", {}, 404, "no route"),
    ],
)
def test_bad_requests_get_protocol_errors(
    server: Server, path: str, body: Any, status: int, needle: str
) -> None:
    got, data = server.request("POST", path, body)
    assert got == status
    assert needle in data.decode()


def test_models_tokenize_health_and_metrics(server: Server) -> None:
    status, data = server.request("GET", "/v1/models")
    assert status == 200
    (card,) = json.loads(data)["data"]
    assert card["id"] == MODEL
    assert card["max_model_len"] == 8192
    tokens = server.post("/tokenize", {"prompt": "Hello world"})
    assert tokens["count"] == len(tokens["tokens"]) == 2
    assert server.post("/detokenize", {"tokens": tokens["tokens"]})["prompt"] == "Hello world"
    assert server.request("GET", "/health")[0] == 200
    assert server.request("POST", "/health")[0] == 405
    metrics = server.request("GET", "/metrics")[1].decode()
    for name in (
        "vllm:num_requests_running",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_count",
    ):
        assert name in metrics
