"""Hostile inputs and misbehaving endpoints, as a demanding user meets them.

Every case runs the real command line (``testbed.cli.main``) in one child process whose
address space is limited (``RLIMIT_AS``), each in an empty working directory of its own.
For every case: no traceback on the terminal and no "internal error"; a user's mistake is
exit 2 with a message saying what is wrong, and leaves nothing behind (its working
directory stays empty: no run directory, no ``--out``); an endpoint's fault is exit 3
naming the endpoint. The YAML alias bomb and the absurd numbers are refused within a CPU
second each (``getrusage``, not a wall clock) and a bounded peak RSS.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from testbed.servers.sim.child import sim_process

ROOT = Path(__file__).resolve().parents[2]
MEMORY_MB = 2048  # the child's address space: a bomb that expands dies here, not the machine
#: What a refusal may add to the peak RSS of the imports (~100 MB here, more where a first
#: import builds caches): the 7x9 bomb grew it to 3.8 GB.
GROWTH_MB = 300
CPU_S = 1.0


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]  # {in} is the inputs folder; {hostile}, {deaf}, {closed}, {sim}: URLs
    code: int
    says: str  # in stderr
    bounded: bool = False  # refused within CPU_S of CPU and GROWTH_MB over the imports
    env: dict[str, str] = field(default_factory=dict)
    unset: list[str] = field(default_factory=list)


def _invalid(name: str, file: str, says: str, *, bounded: bool = False) -> Case:
    """``testbed validate`` of the inputs folder's ``file``, refused (exit 2) saying ``says``."""
    return Case(name, ["validate", "{in}/" + file], 2, says, bounded)


def _dataset_case(label: str, dataset: str, says: str) -> Case:
    """``testbed load`` of a model-less endpoint with ``--dataset DATASET``, refused (exit 2)."""
    argv = ["load", "{hostile}/nomodels", "--model", "m", "--dataset", dataset]
    return Case(f"load {label}", argv, 2, says)


def bomb(levels: int, width: int) -> str:
    lines = ["name: bomb", "a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


SIM = "name: t\ndeployments:\n  - {name: s, server: sim}\n"
EXTERNAL = "name: t\nbackend: {kind: external}\ndeployments:\n  - name: e\n    server: external\n"

#: Input files, written into the inputs folder.
FILES: dict[str, str | bytes] = {
    "ok.yaml": SIM + "load: {requests: 2}\n",
    "bomb.yaml": bomb(7, 9),  # 333 bytes
    "bomb_case.yaml": SIM + "correctness: {cases: [bomb.yaml]}\n",
    "recursive.yaml": "name: &n [*n]\n",
    "deep.yaml": "name: " + "[" * 5000 + "]" * 5000 + "\n",
    "empty.yaml": "",
    "list.yaml": "- name: t\n",
    "latin1.yaml": "name: caf\xe9\n".encode("latin-1"),
    "dup.yaml": SIM + "name: again\n",
    "conc_int.yaml": SIM + "load: {concurrency: 1000000000}\n",
    "conc_str.yaml": SIM + "load: {concurrency: '1000000000'}\n",
    "conc_float.yaml": SIM + "load: {concurrency: 1.0e+9}\n",
    "conc_neg.yaml": SIM + "load: {concurrency: -4}\n",
    "req_int.yaml": SIM + "load: {requests: 100000000000000000000000000}\n",
    "req_float.yaml": SIM + "load: {requests: 1.0e+26}\n",
    "req_str.yaml": SIM + "load: {requests: 1e26}\n",
    "rate_inf.yaml": SIM + "load: {profile: rate, rate: .inf}\n",
    "rate_huge.yaml": SIM + "load: {profile: rate, rate: 1.0e+12}\n",
    "dur_nan.yaml": SIM + "load: {duration_s: .nan}\n",
    "procs.yaml": SIM + "load: {processes: 1000000}\n",
    "sweep.yaml": SIM + "load: {profile: sweep, sweep: {max_concurrency: 100000000}}\n",
    "matrix.yaml": SIM + "load: {}\nmatrix: {factors: {load.concurrency: [1, 1000000000]}}\n",
    "tokens.yaml": SIM + "load: {dataset: {input_tokens: 1000000000}}\n",
    "no_host.yaml": EXTERNAL + "    url: http://\n",
    "bad_port.yaml": EXTERNAL + "    url: http://127.0.0.1:99999\n",
    "unset_key.yaml": EXTERNAL
    + "    url: http://127.0.0.1:9\n    api_key: ${env:HOSTILE_UNSET}\nload: {requests: 1}\n",
    "a_file": "not a directory\n",
    "binary.jsonl": bytes(range(256)),
    "deep.json": "[" * 5000 + "]" * 5000,
    "damaged/run.json": "{garbage",
    "ab_conc.yaml": SIM
    + "  - {name: t, server: sim}\nab: {stable: s, canary: t, concurrency: 1000000000}\n",
    "ab_boot.yaml": SIM
    + "  - {name: t, server: sim}\nab: {stable: s, canary: t, bootstrap_resamples: 1000000000}\n",
}

CASES = [
    # -- campaign files -------------------------------------------------------------------
    _invalid("bomb", "bomb.yaml", "alias *a3 repeats", bounded=True),
    _invalid("bomb in a case file", "bomb_case.yaml", "alias bomb?", bounded=True),
    _invalid("recursive alias", "recursive.yaml", "repeat forever", bounded=True),
    _invalid("5,000 lists deep", "deep.yaml", "nested more than", bounded=True),
    _invalid("empty file", "empty.yaml", "the campaign is empty"),
    Case("a directory", ["validate", "{in}"], 2, "cannot read it as a YAML text file"),
    _invalid("no such file", "nope.yaml", "no such file"),
    _invalid("a list", "list.yaml", "expected a mapping"),
    _invalid("not UTF-8", "latin1.yaml", "cannot read it as a YAML"),
    _invalid("duplicate key", "dup.yaml", "duplicate key 'name'"),
    Case("--set not YAML", ["validate", "{in}/ok.yaml", "--set", "load.requests=[1"], 2, "YAML"),
    # -- absurd numbers ---------------------------------------------------------------------
    _invalid("concurrency 1e9", "conc_int.yaml", "open files", bounded=True),
    _invalid("concurrency '1e9'", "conc_str.yaml", "open files", bounded=True),
    _invalid("concurrency 1.0e+9", "conc_float.yaml", "open files", bounded=True),
    _invalid("concurrency -4", "conc_neg.yaml", "greater than or equal to 1"),
    _invalid("requests 10**26", "req_int.yaml", "load.requests:", bounded=True),
    _invalid("requests 1.0e+26", "req_float.yaml", "load.requests:", bounded=True),
    _invalid("requests '1e26'", "req_str.yaml", "load.requests:", bounded=True),
    _invalid("rate .inf", "rate_inf.yaml", "a finite number", bounded=True),
    _invalid("rate 1e12", "rate_huge.yaml", "in memory", bounded=True),
    _invalid("duration .nan", "dur_nan.yaml", "a finite number", bounded=True),
    _invalid("processes 1e6", "procs.yaml", "load processes need", bounded=True),
    _invalid("sweep 1e8", "sweep.yaml", "sweep.max_concurrency", bounded=True),
    _invalid("matrix level 1e9", "matrix.yaml", "open files", bounded=True),
    _invalid("1e9 input tokens", "tokens.yaml", "in memory", bounded=True),
    Case("run: concurrency 1e9", ["run", "{in}/conc_int.yaml"], 2, "open files", True),
    _invalid("ab concurrency 1e9", "ab_conc.yaml", "ab.concurrency", bounded=True),
    _invalid("ab resamples 1e9", "ab_boot.yaml", "ab.bootstrap_", bounded=True),
    Case("--cpu-budget -1", ["run", "{in}/ok.yaml", "--cpu-budget", "-1"], 2, "positive"),
    # -- URLs, files and keys of a campaign ---------------------------------------------------
    _invalid("url with no host", "no_host.yaml", "names no host"),
    _invalid("port out of range", "bad_port.yaml", "Port out of range"),
    Case("run --out a file", ["run", "{in}/ok.yaml", "--out", "{in}/a_file"], 2, "is a file"),
    Case(
        "run --out under a file",
        ["run", "{in}/ok.yaml", "--out", "{in}/a_file/run"],
        2,
        "cannot create the run directory",
    ),
    Case(
        "api_key unset",
        ["run", "{in}/unset_key.yaml"],
        2,
        "HOSTILE_UNSET is not set",
        unset=["HOSTILE_UNSET"],
    ),
    # -- other commands -----------------------------------------------------------------------
    Case("--explain no such key", ["plan", "{in}/ok.yaml", "--explain", "load.nope"], 2, "nope"),
    Case("report a damaged run", ["report", "{in}/damaged"], 2, "run.json cannot be read"),
    Case("resume a damaged run", ["run", "--resume", "{in}/damaged"], 2, "cannot be read"),
    Case("compare a damaged run", ["compare", "{in}/damaged", "{in}/damaged"], 2, "cannot be"),
    Case("resume a file", ["run", "--resume", "{in}/a_file"], 2, "not a testbed run directory"),
    Case("serve --port 99999", ["serve", "sim", "--port", "99999"], 2, "is not a port"),
    Case("emulate --port -5", ["cluster", "emulate", "--port", "-5"], 2, "is not a port"),
    # -- testbed load: flags and files ------------------------------------------------------
    Case(
        "load --concurrency 1e9",
        ["load", "{hostile}/html", "--concurrency", "1000000000"],
        2,
        "--concurrency: 1,000,000,000 requests in flight",
        bounded=True,
    ),
    Case(
        "load --requests 10**26",
        ["load", "{hostile}/html", "--requests", "1" + "0" * 26],
        2,
        "--requests:",
        bounded=True,
    ),
    Case(
        "load --rate inf",
        ["load", "{hostile}/html", "--profile", "rate", "--rate", "inf"],
        2,
        "finite",
        bounded=True,
    ),
    Case("load --duration -1", ["load", "{hostile}/html", "--duration", "-1"], 2, "greater"),
    Case("load ftp://", ["load", "ftp://127.0.0.1:21"], 2, "the scheme is ftp"),
    Case("load no host", ["load", "http://:8000"], 2, "names no host"),
    Case("load port 99999", ["load", "http://127.0.0.1:99999"], 2, "Port out of range"),
    Case("load --out a file", ["load", "{hostile}/html", "--out", "{in}/a_file"], 2, "--out"),
    _dataset_case("binary dataset", "{in}/binary.jsonl", "not UTF-8"),
    _dataset_case("deep JSON dataset", "{in}/deep.json", "nested too deep"),
    _dataset_case("missing dataset", "{in}/nope.jsonl", "does not exist"),
    _dataset_case("dataset is a dir", "{in}", "is a directory"),
    # -- endpoints that are not what the user thought -------------------------------------------
    Case("an HTML login page", ["load", "{hostile}/html"], 2, "answered an HTML page"),
    Case("404 at /v1/models", ["load", "{hostile}/notfound"], 2, "answered 404 Not Found"),
    Case("garbage JSON", ["load", "{hostile}/garbage"], 2, "body that is not JSON"),
    Case("no models", ["load", "{hostile}/nomodels"], 2, "JSON that lists no model"),
    Case("401", ["load", "{hostile}/e401"], 2, "it wants an API key"),
    Case(
        "unset --api-key-env",
        ["load", "{hostile}/html", "--api-key-env", "HOSTILE_UNSET"],
        2,
        "HOSTILE_UNSET is not set",
        unset=["HOSTILE_UNSET"],
    ),
    # -- endpoints at fault: exit 3, named ------------------------------------------------------
    Case("503", ["load", "{hostile}/e503", "--timeout", "2"], 3, "{hostile}/e503: GET /v1"),
    Case(
        "never answers",
        ["load", "{hostile}/silent", "--timeout", "1"],
        3,
        "{hostile}/silent: GET /v1/models: no answer within 1 s",
    ),
    Case("never accepts", ["load", "{deaf}", "--timeout", "1"], 3, "no answer within 1 s"),
    Case("nothing listens", ["load", "{closed}"], 3, "cannot connect to"),
    # -- what users expect to work ------------------------------------------------------------
    Case(
        "a base URL ending in /v1",
        [
            "load",
            "{sim}/v1",
            "--requests",
            "2",
            "--output-tokens",
            "2",
            "--no-plots",
            "--out",
            "out",
        ],
        0,
        "note: using {sim} (testbed adds /v1/",
    ),
]


@pytest.fixture(scope="module")
def urls(misbehaving_server: str, deaf_port: int) -> Iterator[dict[str, str]]:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = free.getsockname()[1]
    with sim_process("--ttft-ms", "1", "--itl-ms", "1") as sim:
        yield {
            "hostile": misbehaving_server,
            "deaf": f"http://127.0.0.1:{deaf_port}",
            "closed": f"http://127.0.0.1:{closed}",
            "sim": sim,
        }


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, urls: dict[str, str]) -> dict[str, Any]:
    """Every case, run in one child process; results by case name."""
    base = tmp_path_factory.mktemp("hostile")
    inputs = base / "in"
    inputs.mkdir()
    for name, content in FILES.items():
        path = inputs / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    values = {"in": str(inputs), **urls}
    cases = []
    for number, case in enumerate(CASES):
        cwd = base / f"case{number}"
        cwd.mkdir()
        argv = [_fill(a, values) for a in case.argv]
        cases.append({"name": case.name, "argv": argv, "cwd": str(cwd), "unset": case.unset})
    spec, results = base / "cases.json", base / "results.json"
    spec.write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    env["MALLOC_ARENA_MAX"] = "2"  # threads' malloc arenas would count against RLIMIT_AS
    command = [sys.executable, "-m", "tests.cli.hostile_driver", str(spec), str(results)]
    done = subprocess.run(
        [*command, str(MEMORY_MB)],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # before the fix, the alias bomb killed this process with SIGSEGV (-11) at the limit
    assert done.returncode == 0, f"the driver exited {done.returncode}: {done.stderr[-3000:]}"
    by_name = {r["name"]: r for r in json.loads(results.read_text())}
    for number, case in enumerate(CASES):
        by_name[case.name]["left"] = sorted(os.listdir(base / f"case{number}"))
        by_name[case.name]["says"] = _fill(case.says, values)
    return by_name


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input(case: Case, outcomes: dict[str, Any]) -> None:
    got = outcomes[case.name]
    shown = got["stdout"] + got["stderr"]
    assert "Traceback" not in shown, shown
    assert "internal error" not in shown, shown
    assert got["code"] == case.code, shown
    assert got["says"] in got["stderr"], shown
    if case.code == 2:
        assert got["left"] == [], f"an exit 2 left {got['left']} behind"
    if case.bounded:
        assert got["cpu_s"] < CPU_S, f"{got['cpu_s']:.2f} CPU seconds"


def test_the_bomb_is_refused_with_bounded_memory(outcomes: dict[str, Any]) -> None:
    """Run first in its process: the peak RSS after it is imports plus the bomb."""
    got = outcomes["bomb"]
    assert got["code"] == 2
    grown = got["maxrss_mb"] - got["baseline_mb"]
    assert grown < GROWTH_MB, f"peak RSS {got['maxrss_mb']:.0f} MB, {grown:.0f} MB over imports"
    assert got["cpu_s"] < CPU_S


def test_every_refusal_of_absurd_numbers_keeps_memory_bounded(outcomes: dict[str, Any]) -> None:
    """The peak RSS after all the bounded cases (they run before the load tests)."""
    bounded = [c.name for c in CASES if c.bounded and c.argv[0] == "validate"]
    assert max(outcomes[n]["maxrss_mb"] - outcomes[n]["baseline_mb"] for n in bounded) < GROWTH_MB
