"""The TGI dialect: ``/generate`` and ``/generate_stream``, shaped like text-generation-inference.

Streamed events are ``data:{"index","token":{"id","text","logprob","special"},
"generated_text","details"}``; the last one carries the whole text and the details. TGI has no
``ignore_eos`` (it ignores the field); the simulator honours it in ``parameters``, its own
extension, which only a case that states it sends: a load over TGI does not (``clients.apis``).
"""

from __future__ import annotations

import json
from typing import Any

from testbed.config.sim import SimParams
from testbed.servers.sim.dialect import (
    BadRequest,
    GenerationRequest,
    load_json,
    opt_bool,
    opt_int,
    stop_list,
)
from testbed.servers.sim.text import LOGPROBS, VOCABULARY_JSON, Generation

_FINISH = {"length": "length", "eos": "eos_token", "stop_sequence": "stop_sequence"}


class TgiRequest(GenerationRequest):
    """``POST /generate`` (``stream=False``) and ``POST /generate_stream``."""

    @classmethod
    def parse(cls, body: bytes, params: SimParams, *, stream: bool = False) -> TgiRequest:
        data = load_json(body)
        inputs = data.get("inputs")
        if not isinstance(inputs, str):
            raise BadRequest("'inputs' must be a string", "inputs", status=422)
        parameters = data.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise BadRequest("'parameters' must be an object", "parameters", status=422)
        try:
            seed = opt_int(parameters, "seed", 0)
            return cls(
                params,
                prompt=inputs,
                max_tokens=opt_int(parameters, "max_new_tokens", 1),
                stream=stream or opt_bool(data, "stream"),
                ignore_eos=opt_bool(parameters, "ignore_eos"),
                stop=stop_list(parameters.get("stop"), "stop"),
                seed=seed,
            )
        except BadRequest as exc:
            exc.status = 422  # TGI answers validation errors with 422
            raise

    def _details(self, gen: Generation) -> dict[str, Any]:
        return {
            "finish_reason": _FINISH[gen.finish_reason],
            "generated_tokens": len(gen.ids),
            "seed": self.seed,
        }

    def events(self, gen: Generation) -> list[bytes]:
        pre = 'data:{"index":'
        out = []
        whole_tokens = all(len(t) == 4 for t in gen.texts)
        for n, (tid, text) in enumerate(zip(gen.ids, gen.texts, strict=True), start=1):
            tok = VOCABULARY_JSON[tid] if whole_tokens else json.dumps(text)
            out.append(
                f'{pre}{n},"token":{{"id":{tid},"text":{tok},"logprob":{LOGPROBS[tid]},'
                '"special":false},"generated_text":null,"details":null}\n\n'
            )
        if out:
            last = ',"generated_text":null,"details":null}\n\n'
            final = (
                f',"generated_text":{json.dumps(gen.text)},'
                f'"details":{json.dumps(self._details(gen))}}}\n\n'
            )
            out[-1] = out[-1][: -len(last)] + final
        return [e.encode() for e in out]

    def whole(self, gen: Generation) -> bytes:
        return json.dumps({"generated_text": gen.text, "details": self._details(gen)}).encode()

    @staticmethod
    def error_body(status: int, message: str, param: str | None = None) -> bytes:
        kind = "validation" if status in (400, 422) else "generation"
        return json.dumps({"error": message, "error_type": kind}).encode()
