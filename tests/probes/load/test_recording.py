"""The background record writer: order kept, everything written by close, errors surface."""

from __future__ import annotations

import pytest

from testbed.probes.load.recording import BackgroundWriter


def test_writes_everything_in_order() -> None:
    seen: list[int] = []
    with BackgroundWriter(seen.append, interval_s=0.001) as writer:
        for i in range(1000):
            writer(i)
    assert seen == list(range(1000))


def test_a_failing_write_is_raised_by_close() -> None:
    def broken(_item: object) -> None:
        raise OSError("disk full")

    writer = BackgroundWriter(broken)
    writer("x")
    with pytest.raises(OSError, match="disk full"):
        writer.close()
