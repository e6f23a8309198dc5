"""A load test this machine cannot hold is refused with the numbers, naming the field."""

from __future__ import annotations

import resource
from typing import Any

import pytest

from testbed.config.load import LoadProbe
from testbed.probes.limits import Limits
from testbed.probes.load.footprint import excess, open_files_needed, raise_open_files

GIB = 1024**3
SMALL = Limits(open_files=20_000, memory_bytes=16 * GIB, memory_source="physical memory")


def check(limits: Limits = SMALL, **fields: Any) -> tuple[str, str] | None:
    found = excess(LoadProbe.model_validate(fields), limits)
    return (found.field, found.message) if found else None


def test_ordinary_load_tests_fit() -> None:
    assert check() is None
    assert check(concurrency=256, requests=100_000) is None
    assert check(profile="rate", rate=2000, duration_s=60) is None
    assert check(profile="sweep", sweep={"max_concurrency": 512}) is None


def test_concurrency_beyond_the_open_file_limit_names_the_limit_and_the_fixes() -> None:
    field, message = check(concurrency=100_000) or ("", "")
    assert field == "concurrency"
    assert "100,000 requests in flight need 100,064 open files" in message
    assert "allows 20,000 (ulimit -Hn)" in message
    assert "at most 19,936" in message
    assert "processes: 6" in message  # 6 × 16,667 in flight fit
    assert check(concurrency=100_000, processes=6) is None


def test_a_billion_in_flight_does_not_suggest_fifty_thousand_processes() -> None:
    field, message = check(concurrency=10**9) or ("", "")
    assert field == "concurrency"
    assert "processes:" not in message


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"profile": "rate", "rate": 1e12}, "rate"),  # 10^13 records in 10 s
        ({"requests": 10**26, "duration_s": None}, "requests"),
        ({"profile": "sweep", "requests": 10**8, "sweep": {"rates": 10**6}}, "requests"),
        ({"profile": "sweep", "sweep": {"rates": 10**9}}, "sweep.rates"),
        ({"dataset": {"input_tokens": 10**9}}, "dataset.input_tokens"),
        ({"dataset": {"samples": 10**9}}, "dataset.samples"),
        ({"dataset": {"prefix_tokens": 10**6, "prefix_groups": 10**6}}, "dataset.prefix_groups"),
        ({"profile": "ramp", "ramp": {"start_rate": 1, "end_rate": 1e10}}, "ramp.end_rate"),
    ],
)
def test_more_than_memory_names_the_biggest_part(fields: dict[str, Any], field: str) -> None:
    found = check(**fields)
    assert found is not None
    assert found[0] == field
    assert "more than the 16.0 GiB this process may use (physical memory)" in found[1]


def test_many_processes_are_refused_by_pipes_then_by_memory() -> None:
    assert check(processes=10**6) == (
        "processes",
        "1,000,000 load processes need 3,000,064 open files in the process that starts them,"
        " but this machine allows 20,000 (ulimit -Hn) — use fewer (one per core is plenty)",
    )
    field, message = check(processes=1000) or ("", "")
    assert field == "processes"
    assert "62.5 GiB" in message  # 1,000 interpreters of 64 MiB


def test_limits_here_are_this_process_s() -> None:
    limits = Limits.here()
    assert limits.open_files == resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert limits.memory_bytes > 0


def test_the_soft_open_file_limit_is_raised_as_far_as_needed() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    config = LoadProbe(concurrency=10)
    raise_open_files(open_files_needed(config))  # already enough: unchanged
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)
    if hard != resource.RLIM_INFINITY and soft < hard:
        raise_open_files(soft + 1)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == soft + 1
