"""The typed shapes of what a probe writes to ``records.jsonl``, one per record kind.

A load request (:class:`LoadRecord`) and an A/B request (:class:`AbRecord`) are distinct
models: they share a key only where it means the same thing (``sent_ns`` is when the
request was written, null when it never was, in both), and a key whose meaning differs has
another name (A/B's count is the server's, ``usage_output_tokens``; the load record's
``output_tokens`` is the client's). The writers build these TypedDicts — a plain dict on the
hot path, no validation there — so mypy checks every key they write and read; the JSON
Schema (``testbed schema records``) is generated from the same classes by pydantic, each
field's meaning from its ``Annotated`` description (the table of docs/results.md follows
them, and a test holds it to them).

:data:`RECORD_SCHEMA_VERSION` counts incompatible changes of these shapes (a key renamed,
its meaning changed); adding a nullable key does not bump it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, get_args, get_type_hints

from pydantic import Field

# typing_extensions': pydantic reads a TypedDict's schema only from it on Python < 3.12
from typing_extensions import TypedDict

#: Bumped when a record's key is renamed or changes meaning (2: A/B's ``output_tokens``
#: became ``usage_output_tokens``, its ``sent_ns`` null when never sent, ``started_ns`` added).
RECORD_SCHEMA_VERSION = 2

#: How a request failed: no answer came (connect, timeout, protocol) or the server's answer
#: was wrong (server) — the kinds of :mod:`testbed.clients.http_errors`.
FailureKind = Literal["connect", "timeout", "protocol", "server"]


def _doc(text: str) -> Any:
    return Field(description=text)


# -- fields whose meaning both records share -------------------------------------------------

SentNs = Annotated[int | None, _doc("when its request was written")]
ChunksNs = Annotated[
    list[int], _doc("when each content chunk arrived (TTFT is the first minus sent_ns)")
]
DoneNs = Annotated[int | None, _doc("when the answer ended, null when it failed")]
FailedNs = Annotated[
    int | None, _doc("when the client gave up or the answer proved wrong, null when done")
]
Status = Annotated[int, _doc("the HTTP status (TGIS: 200, or the gRPC error's HTTP equivalent)")]
Error = Annotated[str | None, _doc("what went wrong, null when nothing did")]
ErrorKindField = Annotated[
    FailureKind | None,
    _doc("connect, timeout or protocol (no answer came), server (it was wrong); null"),
]
FinishReason = Annotated[str | None, _doc("the server's finish reason (stop, length …)")]
UsageOutputTokens = Annotated[
    int | None, _doc("the server's usage.completion_tokens, null when not given")
]


class RequestPlace(TypedDict):
    """Where a load request comes from: its stage, number, process and dataset item — the
    first fields of its :class:`LoadRecord`, known before it is sent."""

    stage: Annotated[
        str, _doc("the stage the request belongs to (a sweep's stage name, or the profile's)")
    ]
    n: Annotated[int, _doc("the request's number in the run, over all load processes (0, 1, …)")]
    request_id: Annotated[
        str, _doc("sent as the x-request-id header (gRPC metadata for TGIS): <run prefix>-<n>")
    ]
    proc: Annotated[int, _doc("the load process that sent it (0 with processes: 1)")]
    item: Annotated[
        int, _doc("the dataset item (prompt) it sent; sessions: the conversation's index")
    ]
    session: Annotated[
        int | None, _doc("sessions: the session's number in the run (null otherwise)")
    ]
    turn: Annotated[
        int | None,
        _doc("sessions: the turn's index in its session, 0 for the first (null otherwise)"),
    ]
    scheduled_ns: Annotated[
        int, _doc("when it was due (open loop: its arrival time; closed loop: its turn)")
    ]
    queued_ns: Annotated[
        int, _doc("how long it waited for a free slot under max_in_flight (0 when none)")
    ]


class LoadRecord(RequestPlace):
    """One request of the load probe (``testbed run``'s load treatments, ``testbed load``);
    times are monotonic nanoseconds of the load generator's clock, comparable within a run."""

    connect_ns: Annotated[
        int, _doc("time spent opening a new connection for it (0 on a kept-alive one)")
    ]
    sent_ns: SentNs
    first_byte_ns: Annotated[int | None, _doc("when the first byte of the answer arrived")]
    chunks_ns: ChunksNs
    done_ns: DoneNs
    failed_ns: FailedNs
    status: Status
    error: Error
    error_by: Annotated[
        Literal["server", "client"] | None,
        _doc("server (its answer was wrong) or client (timeout, connection); null"),
    ]
    error_kind: ErrorKindField
    finish_reason: FinishReason
    model: Annotated[str | None, _doc("the model its dataset row named (null: the load's model)")]
    inputs: Annotated[
        int | None,
        _doc("embeddings: the inputs in the request's batch (null for generation apis)"),
    ]
    input_tokens: Annotated[
        int, _doc("prompt tokens, counted by the client's tokenizer (embeddings: the batch's)")
    ]
    requested_output_tokens: Annotated[int, _doc("max_tokens asked")]
    usage_input_tokens: Annotated[
        int | None, _doc("the server's usage.prompt_tokens, null when not given")
    ]
    usage_output_tokens: UsageOutputTokens
    client_output_tokens: Annotated[
        int, _doc("output tokens the client counted in the text that arrived")
    ]
    output_tokens: Annotated[
        int, _doc("the output tokens throughput and TPOT use (the client's count)")
    ]
    token_mismatch: Annotated[bool, _doc("the server's count differs from the client's exact one")]
    text: NotRequired[Annotated[str, _doc("the generated text (keep_text: true only)")]]


class AbRecord(TypedDict):
    """One request of the A/B probe: which side it went to and what came back."""

    probe: Annotated[Literal["ab"], _doc("always ab")]
    side: Annotated[Literal["stable", "canary"], _doc("the side it was sent to")]
    deployment: Annotated[str, _doc("that side's deployment")]
    pair: Annotated[
        int, _doc("the pair it belongs to (paired order) or its place in the stream (split)")
    ]
    seq: Annotated[int, _doc("its place in the A/B order")]
    prompt_id: Annotated[str, _doc("the prompt it sent")]
    started_ns: Annotated[int, _doc("when the client began the request (before connecting)")]
    sent_ns: SentNs
    chunks_ns: ChunksNs
    done_ns: DoneNs
    failed_ns: FailedNs
    status: Status
    error: Error
    error_kind: ErrorKindField
    text: Annotated[str, _doc("the generated text (empty when no answer came)")]
    usage_output_tokens: UsageOutputTokens
    finish_reason: FinishReason


#: Each record kind's model, by the name ``testbed schema records`` gives it.
RECORD_KINDS: dict[str, type[Any]] = {"load": LoadRecord, "ab": AbRecord}


def fields_of(model: type[Any]) -> dict[str, str]:
    """Each field of a record model and its meaning, in the order the model declares them
    (the order of records.csv's columns and of the docs' table)."""
    out: dict[str, str] = {}
    for name, declared in get_type_hints(model, include_extras=True).items():
        hint = declared
        while not hasattr(hint, "__metadata__") and get_args(hint):  # NotRequired[Annotated]
            hint = get_args(hint)[0]
        out[name] = next(m.description for m in hint.__metadata__ if hasattr(m, "description"))
    return out


def record_schema() -> dict[str, Any]:
    """The JSON Schema of every record kind, generated from the models."""
    from pydantic import TypeAdapter

    kinds = {name: TypeAdapter(model).json_schema() for name, model in RECORD_KINDS.items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "testbed records (one line of records.jsonl)",
        "version": RECORD_SCHEMA_VERSION,
        "anyOf": [{"$ref": f"#/$defs/{name}"} for name in kinds],
        "$defs": kinds,
    }
