"""An A/B section this machine cannot hold is refused with the numbers, naming the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testbed.config.ab import AbProbe
from testbed.probes.ab.footprint import excess
from testbed.probes.limits import Limits

GIB = 1024**3
SMALL = Limits(open_files=20_000, memory_bytes=16 * GIB, memory_source="ulimit -v")


def field_of(**fields: Any) -> str | None:
    found = excess(AbProbe.model_validate({"stable": "a", "canary": "b", **fields}), SMALL)
    return found.field if found else None


def test_ordinary_comparisons_fit() -> None:
    assert field_of() is None
    assert field_of(requests=20_000, concurrency=64) is None
    assert field_of(rate=50.0, requests=5_000, mode="split") is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"concurrency": 10**9}, "concurrency"),
        ({"requests": 10**12}, "requests"),  # records, and the bootstrap's matrix
        ({"bootstrap_resamples": 10**9}, "bootstrap_resamples"),
        ({"max_tokens": 10**11}, "max_tokens"),
        ({"prompt_count": 10**11}, "prompt_count"),
    ],
)
def test_absurd_numbers_name_their_field(fields: dict[str, Any], field: str) -> None:
    assert field_of(**fields) == field


def test_the_message_says_the_numbers() -> None:
    found = excess(AbProbe(stable="a", canary="b", concurrency=10**9), SMALL)
    assert found is not None
    assert "1,000,000,000 requests in flight per side need 2,000,000,072 open files" in (
        found.message
    )
    found = excess(AbProbe(stable="a", canary="b", bootstrap_resamples=10**9), SMALL)
    assert found is not None
    assert "more than the 16.0 GiB this process may use (ulimit -v)" in found.message


def test_validating_an_ab_campaign_does_not_import_scipy(tmp_path: Path) -> None:
    """The footprint check imports the A/B package; scipy (~0.5 s of CPU) waits for a run."""
    campaign = tmp_path / "ab.yaml"
    campaign.write_text(
        "name: ab\nbackend: {kind: local}\ndeployments:\n"
        "  - {name: s, server: sim}\n  - {name: t, server: sim}\n"
        "ab: {stable: s, canary: t, requests: 10}\n"
    )
    check = (
        "import sys\nfrom testbed.cli import main\n"
        f"assert main(['validate', {str(campaign)!r}]) == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
