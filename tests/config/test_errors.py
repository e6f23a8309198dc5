"""Bad campaigns end with one message naming file, line, field and fix — never a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.config.loader import load_campaign_text
from testbed.core.errors import CampaignError

GOOD = textwrap.dedent(
    """\
    name: good
    deployments:
      - name: sim
        server: sim
        params:
          ttft_ms: 5
      - name: ref
        server: hf
        model: bundled:smollm2-135m
        params:
          dtype: float32
    matrix:
      factors:
        load.concurrency: [1, 2]
    load:
      concurrency: 2
    execution:
      strategy: sliding
      max_parallel: 2
    """
)


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("dtype: float32", "dtpye: float32", 11, "unknown field 'dtpye' — did you mean 'dtype'?"),
        ("server: hf", "server: hff", 8, "did you mean 'hf'?"),
        ("strategy: sliding", "strategy: slidin", 18, "did you mean 'sliding'?"),
        ("max_parallel: 2", "max_parallel: two", 19, "valid integer"),
        ("[1, 2]", "[]", 14, "at least 1 item"),
        ("ttft_ms: 5", "ttft_ms: [5", 7, "flow sequence at line 6"),
    ],
)
def test_message_names_line_field_and_fix(old: str, new: str, line: int, message: str) -> None:
    with pytest.raises(CampaignError) as err:
        load_campaign_text(GOOD.replace(old, new), "c.yaml")
    text = str(err.value)
    assert f"c.yaml:{line}:" in text
    assert message in text


AB_WITHOUT_CRITERIA = """\
name: ab
deployments:
  - {name: stable, server: sim}
  - {name: canary, server: sim}
ab:
  stable: stable
  canary: canary
  criteria:
    min_agreement: null
    max_ttft_p50_regression: null
    max_error_rate_increase: null
"""


def test_an_ab_probe_that_could_never_fail_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CampaignError) as err:
        load_campaign_text(AB_WITHOUT_CRITERIA, "ab.yaml")
    assert str(err.value).startswith("ab.yaml:9:")  # the criteria block
    assert "set at least one of min_agreement" in str(err.value)
    bad = tmp_path / "ab.yaml"
    bad.write_text(AB_WITHOUT_CRITERIA)
    for verb in ("validate", "plan"):
        result = subprocess.run(
            [sys.executable, "-m", "testbed", verb, str(bad)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 2, result.stderr
        assert f"{bad}:9:" in result.stderr


def test_cli_exit_code_two_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("dtype: float32", "dtpye: float32"))
    result = subprocess.run(
        [sys.executable, "-m", "testbed", "validate", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{bad}:11:" in result.stderr


def _mutations() -> st.SearchStrategy[str]:
    """The good campaign with one random edit: a key renamed, a value replaced, a line cut."""
    lines = GOOD.splitlines()
    junk = st.sampled_from(["", "x", "-1", "[", "{a: 1}", "null", "3.5", "- y", "'", "!!int q"])

    @st.composite
    def mutate(draw: st.DrawFn) -> str:
        index = draw(st.integers(0, len(lines) - 1))
        line = lines[index]
        action = draw(st.sampled_from(["value", "key", "drop", "indent"]))
        if action == "value" and ":" in line:
            key = line.split(":", 1)[0]
            line = f"{key}: {draw(junk)}"
        elif action == "key" and ":" in line:
            key, rest = line.split(":", 1)
            line = f"{key}{draw(st.sampled_from(['x', 's', '_']))}:{rest}"
        elif action == "drop":
            line = ""
        else:
            line = " " + line
        return "\n".join([*lines[:index], line, *lines[index + 1 :]]) + "\n"

    return mutate()


@settings(
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_mutations())
def test_mutated_campaigns_fail_cleanly(text: str) -> None:
    """Any mutation either still loads, or raises CampaignError naming the file and a line
    of it (and a column), whether YAML, the schema or a cross-field rule refused it."""
    try:
        load_campaign_text(text, "m.yaml")
    except CampaignError as exc:
        message = str(exc)
        where = re.match(r"m\.yaml:(\d+):(\d+): ", message)
        assert where, message
        assert 1 <= int(where[1]) <= len(text.splitlines()) + 1, message
