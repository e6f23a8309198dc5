"""The submitter's pacing (iterations with a delay, a steady rate with an in-flight cap), its
records, resume after a kill, AlreadyExists and API errors — against an in-memory seam."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from testbed.config.scale import ScaleProbe
from testbed.core.errors import ClusterAccessDenied, InputError
from testbed.probes.scale import submitted
from testbed.probes.scale.submit import Submitter, open_header, template_for


class FakeKube:
    """Creates objects in a dict; AlreadyExists is an answer, as the real Kube.create_once's is."""

    def __init__(self, refuse: set[str] | None = None, latency_s: float = 0.0) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[float, str]] = []
        self.refuse = refuse or set()
        self.latency_s = latency_s
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()

    def info(self, api_version: str, kind: str) -> None:
        return None

    def create_once(self, obj: dict[str, Any], namespace: str) -> tuple[dict[str, Any], bool]:
        name = obj["metadata"]["name"]
        with self._lock:
            self.calls.append((time.perf_counter(), name))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(self.latency_s)
        with self._lock:
            self.in_flight -= 1
            if name in self.refuse:
                raise ClusterAccessDenied(
                    f"create Job {name}: forbidden", status=403, reason="Forbidden"
                )
            if name in self.objects:
                return self.objects[name], True
            self.objects[name] = obj
            return obj, False


def _submitter(tmp_path: Path, fake: FakeKube, **fields: Any) -> tuple[Submitter, set[int]]:
    config = ScaleProbe(**fields)
    template = template_for(config, tmp_path)
    header, existing = open_header(tmp_path, config, template, "ns", "w")
    done = {i for i, s in existing.workloads.items() if s.status != "error"}
    return Submitter(fake, tmp_path, config, template, header), done  # type: ignore[arg-type]


@pytest.mark.timing
def test_iterations_of_parallel_submissions_with_a_delay(tmp_path: Path) -> None:
    fake = FakeKube(latency_s=0.3)
    submitter, done = _submitter(tmp_path, fake, workloads=6, parallel=3, delay_s=0.2)
    outcome = submitter.run(done)
    assert outcome.created == 6
    starts = sorted(t for t, _ in fake.calls)
    gap = starts[3] - starts[2]  # between the two iterations: at least the delay
    assert gap >= 0.2
    assert starts[2] - starts[0] < 0.3  # one iteration goes out together, before any returns
    assert fake.max_in_flight == 3
    records = submitted.load(tmp_path)
    assert [s.name for s in records.ordered()] == [f"w-{i:05d}" for i in range(6)]
    assert all(s.acked_ms >= s.sent_ms for s in records.ordered())


@pytest.mark.timing
def test_steady_rate_spaces_submissions_and_caps_in_flight(tmp_path: Path) -> None:
    fake = FakeKube(latency_s=0.05)
    submitter, done = _submitter(tmp_path, fake, workloads=10, parallel=2, rate=40.0)
    outcome = submitter.run(done)
    assert outcome.created == 10
    starts = sorted(t for t, _ in fake.calls)
    assert starts[-1] - starts[0] >= 9 / 40 - 0.005  # ten at 40/s span at least 225 ms
    assert fake.max_in_flight <= 2


def test_resume_skips_what_was_recorded_and_meets_the_rest_as_existing(tmp_path: Path) -> None:
    fake = FakeKube()
    first, done = _submitter(tmp_path, fake, workloads=4, parallel=2)
    first.run(done)
    # a kill after the create of w-00004 but before its line: it exists, unrecorded
    fake.objects["w-00004"] = {}
    second, done = _submitter(tmp_path, fake, workloads=6, parallel=2)
    assert done == {0, 1, 2, 3}
    outcome = second.run(done)
    assert (outcome.created, outcome.existed, outcome.skipped) == (1, 1, 4)
    names = [s.name for s in submitted.load(tmp_path).ordered()]
    assert names == [f"w-{i:05d}" for i in range(6)]
    assert len(fake.objects) == 6


def test_refused_creates_are_recorded_and_retried_on_resume(tmp_path: Path) -> None:
    fake = FakeKube(refuse={"w-00001"})
    submitter, done = _submitter(tmp_path, fake, workloads=3, parallel=1)
    outcome = submitter.run(done)
    assert (outcome.created, outcome.errors) == (2, 1)
    record = submitted.load(tmp_path).workloads[1]
    assert record.status == "error"
    assert "forbidden" in (record.error or "")
    fake.refuse.clear()
    again, done = _submitter(tmp_path, fake, workloads=3, parallel=1)
    assert done == {0, 2}
    assert again.run(done).created == 1
    assert submitted.load(tmp_path).workloads[1].status == "created"


def test_another_template_in_the_same_directory_is_refused(tmp_path: Path) -> None:
    _submitter(tmp_path, FakeKube(), workloads=2)
    with pytest.raises(InputError, match="new -o directory"):
        _submitter(tmp_path, FakeKube(), workloads=2, gpus=4)
    _submitter(tmp_path, FakeKube(), workloads=5, parallel=3)  # pacing may change
