"""A stack's endpoint as the probes see it (``backends/endpoints.stack_endpoint``): the URL the
backend reached, under the path the campaign's ``endpoint:`` declares (KServe's ``/openai``),
with the stack's tokenizer for exact token counts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from testbed.backends.endpoints import stack_endpoint
from testbed.clients.http import ConnectionPool
from testbed.config.stacks import StackDeployment


def stack(endpoint: dict[str, Any], **more: Any) -> StackDeployment:
    return StackDeployment.model_validate(
        {"server": "manifests", "name": "isvc", "manifests": "stack/", "model": "qwen",
         "endpoint": endpoint, **more}
    )  # fmt: skip


def test_the_endpoint_path_comes_before_every_request_path() -> None:
    deployment = stack(
        {"url_from": "status.url", "kind": "InferenceService", "name": "q", "path": "/openai"},
        tokenizer="tokenizers/qwen",
    )
    endpoint = stack_endpoint(deployment, "http://127.0.0.1:4242/")
    assert endpoint.base_url == "http://127.0.0.1:4242/openai"
    assert endpoint.model == "qwen"
    assert endpoint.tokenizer == "tokenizers/qwen"
    pool = ConnectionPool(endpoint.base_url)
    request = pool.encode("POST", "/v1/completions", b"{}")
    assert request.startswith(b"POST /openai/v1/completions HTTP/1.1\r\n")


def test_without_a_path_the_api_is_at_the_root() -> None:
    endpoint = stack_endpoint(stack({"service": "s", "port": 80}), "http://h:80")
    assert endpoint.base_url == "http://h:80"
    assert endpoint.tokenizer is None


@pytest.mark.parametrize("bad", ["openai", "/openai/", "/a b", "/x?y=1"])
def test_a_path_that_is_not_one_is_refused_at_its_field(bad: str) -> None:
    with pytest.raises(ValidationError, match=r"endpoint\.path|path"):
        stack({"service": "s", "port": 80, "path": bad})
