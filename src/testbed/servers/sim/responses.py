"""The Responses API dialect: ``POST /v1/responses``, streamed as vLLM 0.32 streams it.

The prompt is the ``instructions`` (a system message) and the ``input`` (a string: one user
message; or a list of message items whose ``content`` is a string or ``input_text`` parts);
``max_output_tokens`` bounds the answer. Its timing is chat's (the same TTFT/ITL model, one
``response.output_text.delta`` per token).

A stream is ``event: <type>`` + ``data: <json>`` pairs with a ``sequence_number`` each:
``response.created``, ``response.in_progress``, ``response.output_item.added`` and
``response.content_part.added`` (written with the first token: nothing a client times comes
before it), a delta per token, then ``response.output_text.done``, ``content_part.done``,
``output_item.done`` and ``response.completed`` with the usage. As vLLM does, an answer
stopped by ``max_output_tokens`` ends with ``response.completed`` whose status is
``incomplete`` (OpenAI sends ``response.incomplete``; clients read both). No ``[DONE]``.
"""

from __future__ import annotations

import json
from typing import Any

from testbed.config.sim import SimParams
from testbed.servers.sim.dialect import BadRequest, GenerationRequest, load_json, opt_bool, opt_int
from testbed.servers.sim.openai import chat_prompt, chat_prompt_tokens, content_text
from testbed.servers.sim.text import VOCABULARY_JSON, Generation


def _messages(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's ``instructions`` and ``input`` as chat messages."""
    given = data.get("input")
    if isinstance(given, str):
        messages: list[dict[str, Any]] = [{"role": "user", "content": given}]
    elif isinstance(given, list) and given:
        messages = []
        for item in given:
            if not isinstance(item, dict) or item.get("type", "message") != "message":
                raise BadRequest("the simulator reads 'input' items of type message only", "input")
            content = item.get("content")
            if isinstance(content, list):  # [{"type": "input_text", "text": ...}]
                content = content_text(content)
            messages.append({"role": item.get("role"), "content": content})
    else:
        raise BadRequest("'input' must be a string or a non-empty list of messages", "input")
    instructions = data.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise BadRequest("'instructions' must be a string", "instructions")
        messages.insert(0, {"role": "system", "content": instructions})
    return messages


def _event(kind: str, sequence: int, fields: dict[str, Any]) -> str:
    data = json.dumps({"type": kind, "sequence_number": sequence, **fields}, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n"


class ResponsesRequest(GenerationRequest):
    """``POST /v1/responses``."""

    answer_joint = "\nassistant\n"  # the prompt is a chat's: the answer's message follows

    @classmethod
    def parse(cls, body: bytes, params: SimParams, *, stream: bool = False) -> ResponsesRequest:
        data = load_json(body)
        messages = _messages(data)
        model = data.get("model")
        if model is not None and not isinstance(model, str):
            raise BadRequest("'model' must be a string", "model")
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise BadRequest(f"'seed' must be an integer, got {seed!r}", "seed")
        return cls(
            params,
            prompt=chat_prompt(messages),
            prompt_tokens=chat_prompt_tokens(messages, params),
            max_tokens=opt_int(data, "max_output_tokens", 1),
            stream=stream or opt_bool(data, "stream"),
            ignore_eos=opt_bool(data, "ignore_eos"),
            seed=seed,
            model=model,
        )

    # -- the response object and its parts
    @property
    def _id(self) -> str:
        return "resp_" + self.rid.rsplit("-", 1)[-1]

    @property
    def _item(self) -> str:
        return "msg_" + self.rid.rsplit("-", 1)[-1]

    def _response(self, gen: Generation | None) -> dict[str, Any]:
        """The response object: in progress (``gen`` None) or finished."""
        out: dict[str, Any] = {
            "id": self._id,
            "object": "response",
            "created_at": self.created,
            "model": self.model_name,
            "status": "in_progress",
            "incomplete_details": None,
            "error": None,
            "max_output_tokens": self.max_tokens,
            "output": [],
            "usage": None,
        }
        if gen is None:
            return out
        length = gen.finish_reason == "length"
        n = len(gen.ids)
        out["status"] = "incomplete" if length else "completed"
        out["incomplete_details"] = {"reason": "max_output_tokens"} if length else None
        out["output"] = [self._message(gen.text, "completed")]
        out["usage"] = {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": n,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.prompt_tokens + n,
        }
        return out

    def _message(self, text: str | None, status: str) -> dict[str, Any]:
        content = [] if text is None else [self._part(text)]
        return {
            "id": self._item,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": content,
        }

    @staticmethod
    def _part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    # -- rendering
    def _head(self) -> str:
        """The four events before the first delta (sequence numbers 0–3)."""
        place = {"output_index": 0, "item_id": self._item, "content_index": 0}
        started = self._response(None)
        return "".join(
            [
                _event("response.created", 0, {"response": started}),
                _event("response.in_progress", 1, {"response": started}),
                _event(
                    "response.output_item.added",
                    2,
                    {"output_index": 0, "item": self._message(None, "in_progress")},
                ),
                _event("response.content_part.added", 3, {**place, "part": self._part("")}),
            ]
        )

    def events(self, gen: Generation) -> list[bytes]:
        start = (
            '"item_id":"' + self._item + '","output_index":0,"content_index":0,"logprobs":[],'
            '"delta":'
        )
        if all(len(t) == 4 for t in gen.texts):  # whole vocabulary tokens: pre-encoded
            texts = [VOCABULARY_JSON[i] for i in gen.ids]
        else:
            texts = [json.dumps(t) for t in gen.texts]
        out = [
            "event: response.output_text.delta\ndata: "
            f'{{"type":"response.output_text.delta","sequence_number":{4 + i},{start}{text}}}\n\n'
            for i, text in enumerate(texts)
        ]
        if out:
            out[0] = self._head() + out[0]
        return [e.encode() for e in out]

    def tail(self, gen: Generation) -> bytes:
        n = len(gen.ids)
        place = {"output_index": 0, "item_id": self._item, "content_index": 0}
        seq = 4 + n
        done = [
            _event("response.output_text.done", seq, {**place, "text": gen.text, "logprobs": []}),
            _event("response.content_part.done", seq + 1, {**place, "part": self._part(gen.text)}),
            _event(
                "response.output_item.done",
                seq + 2,
                {"output_index": 0, "item": self._message(gen.text, "completed")},
            ),
            _event("response.completed", seq + 3, {"response": self._response(gen)}),
        ]
        head = self._head() if n == 0 else ""  # no token carried it
        return (head + "".join(done)).encode()

    def whole(self, gen: Generation) -> bytes:
        return json.dumps(self._response(gen)).encode()
