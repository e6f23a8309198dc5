"""kubefacts: quantities written back as manifests carry them, RFC 3339 times both ways, MIG
names in both spellings."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from kubefacts import gpu, times
from kubefacts.errors import InputError
from kubefacts.quantity import (
    amount,
    cpu_quantity,
    format_amount,
    memory_quantity,
    parse,
)


def test_the_full_grammar_parses() -> None:
    assert parse("500m") == Decimal("0.5")
    assert parse("1e3") == 1000
    assert parse("+2Pi") == 2 * 2**50
    assert parse("250u") == Decimal("0.00025")
    assert amount("cpu", "250m") == 250
    with pytest.raises(InputError):
        parse("4 cores")


@pytest.mark.parametrize(
    ("cores", "text"), [(4, "4"), (0.5, "500m"), (0.0015, "2m"), (1.25, "1250m")]
)
def test_cpu_is_written_plain_or_in_millicores(cores: float, text: str) -> None:
    assert cpu_quantity(cores) == text
    assert amount("cpu", text) == amount("cpu", cores)


@pytest.mark.parametrize(("gib", "text"), [(32, "32Gi"), (0.5, "512Mi"), (1.0001, "1025Mi")])
def test_memory_is_whole_gib_or_mib_rounded_up(gib: float, text: str) -> None:
    assert memory_quantity(gib) == text
    assert amount("memory", text) >= gib * 2**30


def test_amounts_are_written_back() -> None:
    assert format_amount("cpu", 4000) == "4"
    assert format_amount("cpu", 500) == "500m"
    assert format_amount("memory", 32 * 2**30) == "32Gi"
    assert format_amount("memory", 3 * 2**20) == "3Mi"
    assert format_amount("memory", 1000) == "1000"
    assert format_amount(gpu.GPU, 2) == "2"


def test_times_round_trip_at_each_precision() -> None:
    when = dt.datetime(2026, 11, 21, 10, 15, 0, 123456, tzinfo=dt.UTC)
    assert times.format_time(when) == "2026-11-21T10:15:00Z"
    assert times.format_time(when, times.MILLIS) == "2026-11-21T10:15:00.123Z"
    assert times.format_time(when, times.MICROS) == "2026-11-21T10:15:00.123456Z"
    assert times.format_time(when, times.NANOS) == "2026-11-21T10:15:00.123456000Z"
    assert times.parse_time("2026-11-21T12:15:00.123456+02:00") == when
    assert times.parse_time("2026-11-21T10:15:00") == when.replace(microsecond=0)
    with pytest.raises(ValueError, match="Invalid isoformat"):
        times.parse_time("yesterday")


def test_seconds_since() -> None:
    now = dt.datetime(2026, 11, 21, 10, 0, 30, tzinfo=dt.UTC)
    assert times.seconds_since("2026-11-21T10:00:00Z", now) == 30.0
    assert times.seconds_since("", now) == 0.0
    assert times.seconds_since(None, now) == 0.0


def test_mig_spellings_meet() -> None:
    assert gpu.mig_profile("mig_1g_10gb") == "1g.10gb"
    assert gpu.mig_profile("1g.10gb") is None
    assert gpu.mig_resource("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert gpu.PLUGIN_MIG.match("3g.40gb")
    assert gpu.mig_memory_gb("mig_3g_40gb") == 40.0
