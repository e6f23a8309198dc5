"""Bad campaigns end with one message naming file, line, field and fix — never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
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
    """Any mutation either still loads, or raises CampaignError naming the file (and a line
    whenever the document parsed)."""
    try:
        load_campaign_text(text, "m.yaml")
    except CampaignError as exc:
        message = str(exc)
        assert message.startswith(("m.yaml", "--set", "preset")), message
        try:
            parsed = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError):
            parsed = None
        if isinstance(parsed, dict) and "name" in parsed:
            assert "m.yaml:" in message or "m.yaml: the campaign" in message, message
