"""Fuzz: 1,000 generated wrong campaigns (tests/config/campaign_mutations.py) through
``testbed validate``, ``testbed plan --json`` and the part of ``testbed run`` before anything
starts. Never a traceback; every refusal exits 2 with ``file:line:col``; the three commands
agree (plan and run refuse exactly what validate refuses, run before a run directory
exists)."""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shutil
import traceback
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed import cli
from testbed.cli import main
from testbed.config.loader import load_campaign
from testbed.execution.pipeline import open_new
from testbed.execution.run import RunOptions
from tests.config.campaign_mutations import EXTRA_BASES, campaigns

EXAMPLES = Path(__file__).parents[2] / "examples"
COUNT = 1000
SEED = 20261123


def call(argv: list[str]) -> tuple[int, str]:
    """``testbed ARGV`` in this process: exit code and stderr (a traceback is a failure)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
        except BaseException:
            return -1, traceback.format_exc()
    return code, err.getvalue()


@pytest.fixture(autouse=True)
def one_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same argparse parser for every call (building it is most of a call's cost)."""
    monkeypatch.setattr(cli, "build_parser", functools.cache(cli.build_parser))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples (their case files and templates resolve) and a CA file."""
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(EXAMPLES, root, dirs_exist_ok=True)
    (root / "ca.pem").write_text("not checked before a connection\n")
    # A cluster campaign's run opens only with a kubeconfig it can use (nothing is sent).
    (root / "testbed-emulator.kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: here, context: {cluster: c, user: u}}]\n"
        "current-context: here\n"
    )
    return root


@pytest.fixture(autouse=True)
def cluster_config(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scale-test.yaml names testbed-emulator.kubeconfig (a path from where you are)."""
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("KUBECONFIG", str(workdir / "testbed-emulator.kubeconfig"))


def bases() -> list[dict[str, Any]]:
    docs = [yaml.safe_load(p.read_text()) for p in sorted(EXAMPLES.glob("*.yaml"))]
    return [*docs, *EXTRA_BASES]


def check(file: Path, out: Path, label: str) -> tuple[bool, list[str]]:
    """Run the three commands on ``file``; (refused, problems found)."""
    problems = []
    where = re.compile(rf"^testbed: error: {re.escape(str(file))}:\d+:\d+: ", re.M)
    results = {}
    for command in ("validate", "plan"):
        code, err = call([command, str(file)] + (["--json"] if command == "plan" else []))
        results[command] = code
        if code not in (0, 2) or "Traceback" in err:
            problems.append(f"{command} exited {code}:\n{err}")
        elif code == 2 and not where.search(err):
            problems.append(f"{command} refused without file:line:col:\n{err}")
    if results["plan"] != results["validate"]:
        problems.append(f"plan exited {results['plan']}, validate {results['validate']}")
    refused = results["validate"] != 0
    if refused:
        code, err = call(["run", str(file), "--out", str(out)])
        if code != 2 or "Traceback" in err:
            problems.append(f"run exited {code} where validate refused:\n{err}")
        if out.exists():
            problems.append("run created a run directory for a refused campaign")
    else:
        try:  # what `testbed run` does before its first phase
            open_new(load_campaign(file), RunOptions(out=out))
        except BaseException:
            problems.append(f"run could not open what validate accepted:\n{traceback.format_exc()}")
    return refused, [f"{label}: {p}" for p in problems]


@pytest.mark.slow
def test_a_thousand_wrong_campaigns_get_clean_answers(workdir: Path) -> None:
    refused = 0
    problems: list[str] = []
    generated = campaigns(bases(), COUNT, SEED)
    for index, (label, doc) in enumerate(generated):
        file = workdir / f"c{index:04}.yaml"
        file.write_text(yaml.safe_dump(doc, sort_keys=False))
        was_refused, found = check(file, workdir / "runs" / f"r{index:04}", label)
        refused += was_refused
        problems += [f"{file.name} ({p})\n{file.read_text()}" for p in found]
    assert not problems, f"{len(problems)} problem(s); first:\n" + "\n\n".join(problems[:3])
    # Not vacuous: most mutations make a campaign wrong, some leave it valid.
    assert COUNT * 0.6 < refused < COUNT, refused
