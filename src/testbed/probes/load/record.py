"""One request's record: what the load generator writes the moment a request ends.

The record keeps the raw observations (times, status, the server's counts) and what the
client knows itself. Output tokens are the client's count of the text that arrived: a
server's ``usage`` is the server's word, so it is kept beside (``usage_output_tokens``,
``usage_input_tokens``, integers or null) but never feeds throughput or TPOT.

The client's protocol sink has already refused counts that cannot be true for any text
(:mod:`testbed.clients.counts`); here, where the model's tokenizer counted the same text
(``counter.exact``), a server's count farther from the client's than re-tokenisation explains
is the server's error too: output tokens either way; prompt tokens fewer than the prompt
has, or — where no chat template adds its own — more.
"""

from __future__ import annotations

from testbed.clients.apis import Api
from testbed.clients.counts import disagreement, whole_number
from testbed.clients.http_errors import ErrorKind
from testbed.clients.response import Response
from testbed.core.clock import monotonic_ns
from testbed.probes.load.dataset import Item
from testbed.probes.load.tokens import TokenCounter
from testbed.results.records import LoadRecord, RequestPlace


def request_record(
    response: Response,
    error: str | None,
    asked: Item,
    counter: TokenCounter,
    api: Api,
    place: RequestPlace,
    error_kind: ErrorKind | None = None,
) -> LoadRecord:
    """The record of one request for the item ``asked``. ``error``: the client's own failure
    (timeout, connection), None when the server answered, and ``error_kind`` its kind (the
    exception's: :mod:`testbed.clients.http_errors`); ``place``: where the request comes
    from (stage, n, proc, item …), written first."""
    usage = response.usage if isinstance(response.usage, dict) else {}
    server_out = whole_number(usage.get("completion_tokens"))
    server_in = whole_number(usage.get("prompt_tokens"))
    client_out = counter.count(response.text) if response.chunks else 0
    # the server's own answer (an HTTP error, an error event, no content) vs the client's
    # (timeout, connection): only the first proves the server wrong whatever the harness did
    by_server = error is None
    error = error or response.error
    if error is None and not response.chunks and asked.inputs is None:  # embeddings: vectors
        error = "no content in the response"
    if error is None and counter.exact:
        error = _counts_disagree(server_out, client_out, server_in, asked, counter, api)
    # each key by name, not ``**place``: mypy checks a TypedDict display key by key
    return {
        "stage": place["stage"],
        "n": place["n"],
        "request_id": place["request_id"],
        "proc": place["proc"],
        "item": place["item"],
        "session": place["session"],
        "turn": place["turn"],
        "scheduled_ns": place["scheduled_ns"],
        "queued_ns": place["queued_ns"],
        "connect_ns": response.connect_ns,
        "sent_ns": response.t_sent_ns or None,
        "first_byte_ns": response.t_first_byte_ns or None,
        "chunks_ns": [t for t, _ in response.chunks],
        "done_ns": response.t_done_ns or None,
        "failed_ns": monotonic_ns() if error and not response.t_done_ns else None,
        "status": response.status,
        "error": error,
        "error_by": None if error is None else "server" if by_server else "client",
        "error_kind": None if error is None else "server" if by_server else error_kind,
        "finish_reason": response.finish_reason,
        "model": asked.model,
        "inputs": None if asked.inputs is None else len(asked.inputs),
        "input_tokens": asked.input_tokens,
        "requested_output_tokens": asked.output_tokens,
        "usage_input_tokens": server_in,
        "usage_output_tokens": server_out,
        "client_output_tokens": client_out,
        "output_tokens": client_out,
        "token_mismatch": server_out is not None and counter.exact and server_out != client_out,
    }


def _counts_disagree(
    server_out: int | None,
    client_out: int,
    server_in: int | None,
    item: Item,
    counter: TokenCounter,
    api: Api,
) -> str | None:
    """Why the server's counts cannot be those of the text the client counted exactly."""
    by = f"the client counted {{}} with {counter.name}, more apart than re-tokenisation explains"
    if server_out is not None and disagreement(server_out, client_out):
        return f"usage.completion_tokens {server_out}, but {by.format(f'{client_out} in its text')}"
    prompt = item.input_tokens
    if server_in is None or not disagreement(server_in, prompt):
        return None
    # a chat template (chat, responses) and an embedding model's special tokens per input
    # (embeddings) only add to the prompt
    if server_in < prompt or not api.adds_to_prompt:
        return f"usage.prompt_tokens {server_in}, but {by.format(f'{prompt} in the prompt')}"
    return None
