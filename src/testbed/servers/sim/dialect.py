"""What every generation protocol shares: the parsed request and how its answer is rendered.

A dialect (OpenAI completions, OpenAI chat, TGI, TGIS) parses a request body into a
:class:`GenerationRequest` subclass; that object then renders the answer as bytes on the
wire: one server-sent event (or gRPC message) per token, a tail (usage, ``[DONE]``), or one
body. The differences between protocols live in the subclasses, not in ``if`` chains in
the app.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from testbed.config.sim import SimParams
from testbed.servers.sim.text import Generation, count_tokens


class BadRequest(Exception):
    """The client sent something the protocol rejects; becomes a 4xx with an error body."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


def load_json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    return data


def opt_int(data: dict[str, Any], key: str, minimum: int) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadRequest(f"'{key}' must be an integer >= {minimum}, got {value!r}", key)
    return value


def opt_bool(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be a boolean, got {value!r}", key)
    return value


def stop_list(value: Any, key: str = "stop") -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(value)
    raise BadRequest(f"'{key}' must be a string or a list of strings", key)


class GenerationRequest:
    """A parsed generation request; subclasses add parsing and rendering for one protocol."""

    content_type: ClassVar[bytes] = b"text/event-stream"
    #: What comes between the prompt and the answer in the text a conversation's next turn
    #: starts with (the prefix cache names the answer's blocks over it): a completion's
    #: prompt goes straight on; a chat prompt names the assistant's role first.
    answer_joint: ClassVar[str] = ""

    def __init__(
        self,
        params: SimParams,
        *,
        prompt: str,
        prompt_tokens: int | None = None,
        max_tokens: int | None,
        stream: bool,
        include_usage: bool = False,
        ignore_eos: bool = False,
        stop: tuple[str, ...] = (),
        seed: int | None = None,
        model: str | None = None,
    ) -> None:
        self.prompt = prompt
        self.prompt_tokens = (
            count_tokens(prompt, params.tokenizer) if prompt_tokens is None else prompt_tokens
        )
        self.max_tokens = params.default_output_tokens if max_tokens is None else max_tokens
        self.stream = stream
        self.include_usage = include_usage
        self.ignore_eos = ignore_eos
        self.stop = stop
        self.seed = seed
        self.model = model
        # Set by the app once the request is accepted (labels, not arithmetic).
        self.rid = ""
        self.created = 0
        self.model_name = params.model_name

    @classmethod
    def parse(cls, body: bytes, params: SimParams, *, stream: bool = False) -> GenerationRequest:
        """The request in ``body``; ``stream`` forces streaming (TGI's /generate_stream)."""
        raise NotImplementedError

    # -- rendering, one protocol per subclass
    def events(self, gen: Generation) -> list[bytes]:
        """One event per generated token, as written, the finish reason on the last."""
        raise NotImplementedError

    def tail(self, gen: Generation) -> bytes:
        """What follows the last token event (usage, ``[DONE]``)."""
        return b""

    def whole(self, gen: Generation) -> bytes:
        """The non-streamed answer."""
        raise NotImplementedError

    def overloaded(self, message: str) -> bytes:
        """The body of the 503 a full waiting queue answers at once (the dialect's error;
        a dialect whose protocol has its own word for an overload says it here)."""
        return self.error_body(503, message)

    @staticmethod
    def error_body(status: int, message: str, param: str | None = None) -> bytes:
        """An OpenAI-style error object."""
        kind = {400: "BadRequestError", 404: "NotFoundError"}.get(status, "ServerError")
        error = {"message": message, "type": kind, "param": param, "code": status}
        return json.dumps({"error": error, "object": "error", **error}).encode()

    @staticmethod
    def malformed(event: bytes) -> bytes:
        """A broken copy of ``event``: its JSON cut in half (the malformed-chunk fault)."""
        return event[: max(8, len(event) // 2)].rstrip(b"\n") + b"\n\n"

    def usage(self, gen: Generation) -> dict[str, int]:
        n = len(gen.ids)
        return {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + n,
            "completion_tokens": n,
        }
