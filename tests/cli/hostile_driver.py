"""Runs many ``testbed`` command lines in one process, for tests/cli/test_hostile_inputs.py.

``python -m tests.cli.hostile_driver CASES.json RESULTS.json``: each case is
``{"name", "argv", "cwd", "env"}``. The process first limits its own address space
(``RLIMIT_AS``, from ``--memory-mb``), so a command that tries to build a huge document
fails here instead of taking the machine; then it calls :func:`testbed.cli.main` for each
case with stdout and stderr captured and writes, per case, the exit code, both outputs, the
CPU seconds the case used and the process's peak RSS after it (``getrusage``): measures
that do not depend on how busy the machine is. One interpreter for every case keeps the
suite fast (startup and imports are paid once).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

#: What the commands import lazily; a case's CPU seconds should be its own work.
_HEAVY = (
    "testbed.cli",
    "testbed.config.loader",
    "testbed.execution.pipeline",
    "testbed.probes.load.probe",
    "testbed.report.run_summary",
    "testbed.report.live",
)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    from testbed.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env = dict(os.environ)
    os.environ.update(case.get("env", {}))
    for name in case.get("unset", []):
        os.environ.pop(name, None)
    cwd = os.getcwd()
    os.chdir(case["cwd"])
    started = _cpu_s()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(case["argv"])
            except SystemExit as exc:  # argparse's own refusals
                code = int(exc.code or 0)
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return {
        "name": case["name"],
        "code": code,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "cpu_s": _cpu_s() - started,
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str]) -> int:
    cases_file, results_file, memory_mb = argv[0], argv[1], int(argv[2])
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for module in _HEAVY:  # imported once, before any case: not counted as a case's CPU
        importlib.import_module(module)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # imports alone
    cases = json.loads(Path(cases_file).read_text())
    results = [{**run_case(case), "baseline_mb": baseline} for case in cases]
    Path(results_file).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
