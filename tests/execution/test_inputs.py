"""Files a campaign names are checked by validate (and run) before anything starts: a
missing one is exit 2 at the line that names it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from testbed.cli import main

HEAD = textwrap.dedent(
    """\
    name: files
    deployments:
      - {name: a, server: sim}
      - {name: b, server: sim}
    """
)


@pytest.mark.parametrize(
    ("section", "place", "field"),
    [
        ("correctness:\n  cases: [gone.yaml]\n", "6:11", "correctness.cases[0]"),
        ("ab:\n  stable: a\n  canary: b\n  prompts: gone.jsonl\n", "8:12", "ab.prompts"),
        (
            "load:\n  requests: 2\n  dataset: {kind: file, path: gone.jsonl}\n",
            "7:31",
            "load.dataset.path",
        ),
    ],
)
def test_a_missing_file_is_refused_at_its_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    section: str,
    place: str,
    field: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # dataset paths start at the working directory
    file = tmp_path / "c.yaml"
    file.write_text(HEAD + section)
    assert main(["validate", str(file)]) == 2
    assert main(["run", str(file), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{file}:{place}: {field}: no file gone." in err
    assert not (tmp_path / "run").exists()
    (tmp_path / ("gone.yaml" if "cases" in field else "gone.jsonl")).write_text("")
    capsys.readouterr()
    main(["validate", str(file)])
    assert "no file gone." not in capsys.readouterr().err  # once it exists, that check passes
