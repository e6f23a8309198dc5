"""docs/kubernetes.md's "What testbed needs on your cluster" is the output of the code that
writes the runner's Roles, so it cannot drift from what testbed does."""

from __future__ import annotations

from pathlib import Path

from testbed.backends.kubernetes.rights import table

DOC = Path(__file__).resolve().parents[3] / "docs" / "kubernetes.md"


def test_the_docs_table_is_the_generated_one() -> None:
    text = DOC.read_text()
    begin, end = "<!-- rights:begin -->\n", "\n<!-- rights:end -->"
    assert text.count(begin) == text.count(end) == 1
    documented = text[text.index(begin) + len(begin) : text.index(end)]
    assert documented.splitlines() == table()


def test_each_feature_adds_what_it_uses_and_no_secret_is_listed() -> None:
    lines = table()
    features = [line.split(" | ")[0].removeprefix("| ") for line in lines[2:]]
    assert sum(1 for f in features if f) == 6  # a plain run and five features
    secrets = [line for line in lines if "`secrets`" in line]
    # Secrets: create, then by name only — never a LIST (it returns every Secret's value)
    assert all("list" not in line and ("named" in line or line.endswith("| create |"))
               for line in secrets)  # fmt: skip
    assert any("`jobs` | get, watch, create, delete" in line for line in lines)
    assert not any("*" in line for line in lines)
