"""The gang follower of the scheduler and scale tests (tests/fixtures/gangs.py) bites: fed a
gang bound in part it reports it, and it refuses to vouch for a run it did not watch."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures.gangs import LABEL, PartialGangs


def _pod(name: str, gang: str, node: str | None) -> SimpleNamespace:
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name, labels={LABEL: gang}),
        spec=SimpleNamespace(node_name=node),
        status=SimpleNamespace(phase="Running" if node else "Pending"),
    )


def test_a_gang_bound_in_part_is_reported() -> None:
    watcher = PartialGangs(Path("unused"))
    watcher._apply("ADDED", _pod("a-0", "a", "node-1"))
    watcher._apply("ADDED", _pod("a-1", "a", None))
    watcher._check()
    assert watcher.partial == ["a at version 1"]
    watcher._apply("MODIFIED", _pod("a-1", "a", "node-2"))
    watcher._check()
    assert watcher.partial == ["a at version 1"]  # whole now: nothing more
    assert watcher.most_bound == 2


def test_a_follower_that_saw_nothing_vouches_for_nothing() -> None:
    watcher = PartialGangs(Path("unused"))
    watcher._check()  # never started: an empty partial list, and no evidence
    assert watcher.partial == []
    with pytest.raises(AssertionError, match="never saw these pods bound"):
        watcher.assert_watched(["a-0"])
    watcher.error = RuntimeError("watch refused")
    with pytest.raises(AssertionError, match="failed"):
        watcher.assert_watched(["a-0"])
