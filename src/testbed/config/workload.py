"""Workloads of the ``load:`` section that are more than a bag of prompts.

- :class:`SessionDataset` (``kind: sessions``): multi-turn conversations. Each turn's
  request carries the session's history — the chat messages so far (``api: chat``) or the
  completions prompt grown by every previous turn and answer — so a server's prefix cache
  sees the history as a cached prefix. Conversations come from a ShareGPT file (every
  human turn, not only the first) or are generated (turns per session, tokens per turn,
  think time between turns). ``unit`` says what the profile's ``concurrency`` and ``rate``
  count: whole sessions, or turn requests.
- :class:`TraceDataset` (``kind: trace``, with ``profile: trace``): a timestamped trace
  replayed at its own offsets — the Mooncake format (JSON lines of ``timestamp`` in ms,
  ``input_length``, ``output_length``, ``hash_ids`` naming shared blocks of
  ``block_tokens`` tokens) or a plain JSONL/CSV of ``time_s``/``timestamp``, lengths and
  optionally the prompt; sped up or slowed down (``speed``), cut to a window and looped.

Lengths are in tokens; times in seconds unless the name ends in ``_ms``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from testbed.config.lengths import FixedLength, Length, length_shorthand


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


class SessionDataset(_Strict):
    """Multi-turn sessions: a ShareGPT file's conversations (``path``), or generated ones."""

    kind: Literal["sessions"]
    path: str | None = Field(
        None,
        description="ShareGPT JSON/JSONL file (every human turn is a request, the model's"
        " reply its output length), relative to the campaign file; unset: generated sessions.",
    )
    sessions: int = Field(
        200, ge=1, description="Generated sessions (a file: at most this many, when limit)."
    )
    turns: Length = Field(
        default_factory=lambda: FixedLength(value=4),
        description="Turns per generated session; an integer means fixed.",
    )
    input_tokens: Length = Field(
        default_factory=lambda: FixedLength(value=128),
        description="New user tokens per turn, before the history (tokens).",
    )
    output_tokens: Length = Field(
        default_factory=lambda: FixedLength(value=64),
        description="Output tokens asked per turn, sent as max_tokens (tokens).",
    )
    think_time_s: float = Field(
        0.0, ge=0, description="Pause between an answer and the session's next turn (s)."
    )
    unit: Literal["sessions", "turns"] = Field(
        "sessions",
        description="What concurrency and rate count: sessions (N sessions in flight, N new"
        " sessions per second) or turns (N turn requests in flight, N turns per second; a"
        " ready turn goes before a new session).",
    )
    limit: int | None = Field(None, ge=1, description="A file: use at most this many sessions.")
    shuffle: bool = Field(True, description="A file: shuffle the sessions with the seed.")

    @field_validator("turns", "input_tokens", "output_tokens", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return length_shorthand(value)


class TraceDataset(_Strict):
    """A timestamped trace, replayed at its offsets (``profile: trace``)."""

    kind: Literal["trace"]
    path: str = Field(description="Trace file, relative to the campaign file.")
    format: Literal["mooncake", "jsonl", "csv"] = Field(
        "mooncake",
        description="mooncake: JSONL with timestamp (ms), input_length, output_length,"
        " hash_ids; jsonl/csv: time_s (or timestamp, ms), input_tokens, output_tokens and"
        " optionally prompt.",
    )
    block_tokens: int = Field(
        512, ge=1, description="Tokens per hash_ids block (Mooncake's traces: 512)."
    )
    speed: float = Field(
        1.0, gt=0, description="Time scaling: 2 replays twice as fast (offsets halved)."
    )
    start_s: float = Field(0.0, ge=0, description="Window: replay from this trace time (s).")
    end_s: float | None = Field(
        None, gt=0, description="Window: replay up to this trace time (s); unset: the end."
    )
    loop: bool = Field(
        False,
        description="Replay the window again and again until duration_s or requests"
        " (one of them is then needed).",
    )

    @model_validator(mode="after")
    def _window(self) -> TraceDataset:
        if self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(
                f"trace window: end_s ({self.end_s:g}) must be after start_s ({self.start_s:g})"
            )
        return self


def check_workload(
    dataset: Any, profile: str, duration_s: float | None, requests: int | None
) -> None:
    """The load section's rules for these datasets (raised as ValueError for pydantic)."""
    if profile == "trace" and not isinstance(dataset, TraceDataset):
        raise ValueError("profile 'trace' replays a trace: give dataset: {kind: trace, path: ...}")
    if isinstance(dataset, TraceDataset):
        if profile not in ("trace", "synchronous", "concurrency"):
            raise ValueError(
                f"a trace brings its own arrival times: use profile 'trace' (not {profile!r});"
                " synchronous or concurrency replay its prompts without its timing"
            )
        if dataset.loop and duration_s is None and requests is None:
            raise ValueError(
                "dataset.loop replays the trace forever: give duration_s or requests to end it"
            )
    if isinstance(dataset, SessionDataset) and profile in ("sweep", "ramp"):
        raise ValueError(
            f"profile {profile!r} is not played with sessions: use synchronous, concurrency"
            " or rate (dataset.unit says whether they count sessions or turns)"
        )
