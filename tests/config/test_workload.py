"""The load section's sessions and trace datasets: their forms and the rules between them and
the profile (config/workload.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from testbed.config.load import FixedLength, LoadProbe, UniformLength
from testbed.config.workload import SessionDataset, TraceDataset


def test_sessions_take_the_length_forms_of_the_load_section() -> None:
    config = LoadProbe.model_validate(
        {"dataset": {"kind": "sessions", "turns": [2, 3], "input_tokens": 50}}
    )
    ds = config.dataset
    assert isinstance(ds, SessionDataset)
    assert ds.turns.model_dump() == {"kind": "list", "values": [2, 3]}
    assert ds.input_tokens == FixedLength(value=50)
    assert ds.output_tokens == FixedLength(value=64)
    uniform = {"kind": "uniform", "min": 1, "max": 4}
    ds = SessionDataset.model_validate({"kind": "sessions", "turns": uniform})
    assert isinstance(ds.turns, UniformLength)


def test_a_bad_session_length_names_its_field() -> None:
    with pytest.raises(ValidationError, match="turns"):
        LoadProbe.model_validate({"dataset": {"kind": "sessions", "turns": 0}})
    with pytest.raises(ValidationError, match="think_time_s"):
        LoadProbe.model_validate({"dataset": {"kind": "sessions", "think_time_s": -1}})


def test_a_trace_brings_its_own_timing() -> None:
    trace = {"kind": "trace", "path": "t.jsonl"}
    assert LoadProbe.model_validate({"profile": "trace", "dataset": trace}).profile == "trace"
    with pytest.raises(ValidationError, match="profile 'trace' replays a trace"):
        LoadProbe.model_validate({"profile": "trace"})
    with pytest.raises(ValidationError, match="brings its own arrival times"):
        LoadProbe.model_validate({"profile": "rate", "rate": 5, "dataset": trace})
    # closed loop replays its prompts without its times
    LoadProbe.model_validate({"profile": "concurrency", "dataset": trace})


def test_a_looped_trace_needs_an_end() -> None:
    trace = {"kind": "trace", "path": "t.jsonl", "loop": True}
    with pytest.raises(ValidationError, match="give duration_s or requests"):
        LoadProbe.model_validate({"profile": "trace", "dataset": trace})
    LoadProbe.model_validate({"profile": "trace", "dataset": trace, "duration_s": 5})


def test_a_trace_window_is_ordered_and_speed_positive() -> None:
    with pytest.raises(ValidationError, match=r"end_s .* must be after start_s"):
        TraceDataset.model_validate({"kind": "trace", "path": "t", "start_s": 5, "end_s": 2})
    with pytest.raises(ValidationError, match="speed"):
        TraceDataset.model_validate({"kind": "trace", "path": "t", "speed": 0})


def test_sessions_are_not_swept_or_ramped() -> None:
    for profile in ("sweep", "ramp"):
        with pytest.raises(ValidationError, match="not played with sessions"):
            LoadProbe.model_validate(
                {"profile": profile, "duration_s": 5, "dataset": {"kind": "sessions"}}
            )
