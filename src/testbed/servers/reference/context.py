"""What every protocol handler of the reference server shares: engine, tokenizer, names.

Also the request-field helpers both protocols use, so that OpenAI and TGI map their
sampling fields onto :class:`SamplingParams` by the same rules and the same error messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from testbed.servers.reference.engine import Engine
from testbed.servers.reference.sampling import SamplingParams


class BadRequest(ValueError):
    """The request is wrong; answered with HTTP 400 and this message."""


class UnknownModel(BadRequest):
    """The request names a model this server does not serve (HTTP 404, as vLLM answers)."""


@dataclass
class ServerContext:
    engine: Engine
    model_name: str  # the served name (``/v1/models``)
    aliases: frozenset[str]  # other names accepted in requests (the folder path)
    max_len: int
    max_batch: int

    @property
    def tokenizer(self) -> Any:
        return self.engine.loaded.tokenizer

    def check_model(self, name: str) -> None:
        if name != self.model_name and name not in self.aliases:
            raise UnknownModel(
                f"The model `{name}` does not exist; this server serves `{self.model_name}`"
            )

    def prompt_ids(self, prompt: Any) -> list[int]:
        """Token ids of a completion prompt: a string, a one-element list, or token ids."""
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]
        if isinstance(prompt, str):
            if not prompt:
                raise BadRequest("prompt is empty")
            return list(self.tokenizer(prompt)["input_ids"])
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            vocab = len(self.tokenizer)
            if any(not 0 <= t < vocab for t in prompt):
                raise BadRequest(f"prompt token ids must lie in 0..{vocab - 1}")
            return list(prompt)
        raise BadRequest("prompt must be a string or a list of token ids (one prompt per call)")

    def chat_ids(self, messages: list[Any], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of ``messages`` rendered by the model's chat template."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise BadRequest(
                f"the model `{self.model_name}` has no chat template, so chat messages cannot be"
                " rendered; send a prompt to /v1/completions (or TGI's /generate) instead"
            )
        plain = []
        for m in messages:
            if not isinstance(m, dict) or "role" not in m:
                raise BadRequest("each message needs a role and a content")
            content = m.get("content") or ""
            if isinstance(content, list):  # [{"type": "text", "text": …}, …]
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            plain.append({"role": str(m["role"]), "content": str(content)})
        text = self.tokenizer.apply_chat_template(
            plain, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def number(body: Mapping[str, Any], key: str, default: float) -> float:
    """A numeric field of the request (``BadRequest`` naming it when it is not a number)."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{key} must be a number, got {value!r}")
    return float(value)


def sampling(
    body: Mapping[str, Any],
    *,
    max_tokens: Any,
    logprobs: int | None,
    default_temperature: float = 1.0,
) -> SamplingParams:
    """Map the sampling fields the protocols share onto :class:`SamplingParams`."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest(f"max_tokens must be a positive integer, got {max_tokens!r}")
    temperature = number(body, "temperature", default_temperature)
    top_p = number(body, "top_p", 1.0)
    top_k = int(number(body, "top_k", 0))
    if temperature < 0 or not 0 < top_p <= 1 or top_k < -1:
        raise BadRequest("need temperature >= 0, 0 < top_p <= 1 and top_k >= -1")
    stop = body.get("stop")
    stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
    if not all(isinstance(s, str) for s in stops):
        raise BadRequest("stop must be a string or a list of strings")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest(f"seed must be an integer, got {seed!r}")
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=max(top_k, 0),
        seed=seed,
        stop=tuple(s for s in stops if s),
        ignore_eos=bool(body.get("ignore_eos", False)),
        logprobs=logprobs,
    )
