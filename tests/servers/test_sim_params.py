"""Simulator parameters that had no test proving they are used (the field audit)."""

from __future__ import annotations

import json
import urllib.request

import openai

from testbed.config.sim import SimParams
from testbed.servers.sim import serve_in_thread


def test_default_output_tokens_when_a_request_sets_no_max() -> None:
    with serve_in_thread(SimParams(default_output_tokens=5)) as url:
        sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=10)
        try:
            reply = sdk.completions.create(model="sim-model", prompt="a b c")
            capped = sdk.completions.create(model="sim-model", prompt="a b c", max_tokens=2)
        finally:
            sdk.close()
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 5
    assert len(reply.choices[0].text.split()) == 5
    assert capped.usage is not None
    assert capped.usage.completion_tokens == 2


def test_dtype_is_reported_at_info() -> None:
    """The simulator computes nothing in a dtype; it reports the one it was given, as TGI's
    /info does, so a matrix over dtypes runs on it and shows in its answers."""
    with (
        serve_in_thread(SimParams(dtype="bfloat16")) as url,
        urllib.request.urlopen(f"{url}/info", timeout=5) as reply,
    ):
        info = json.loads(reply.read())
    assert info["model_dtype"] == "bfloat16"
