"""``testbed scale sample --follow`` ends on SIGINT — its documented end — however it was
started: also with SIGINT ignored on entry, as a script's background job or some CI runners
start their commands (Python then installs no handler of its own and the follower ran on
until ``--timeout``, with the scale-truth test waiting for it)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.probes.scale import sampled
from testbed.probes.scale.submitted import SUBMITTED, Header, line
from tests.probes.scale import scripted_api

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


def _ignore_sigint() -> None:  # in the child, before exec: what a background job inherits
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_follower_started_with_sigint_ignored_still_ends_on_sigint(tmp_path: Path) -> None:
    flags = ["--workloads", "3", "--span", "0.2", "--delay", "0.1", "--watchers", "1"]
    with scripted_api.running(tmp_path, *flags) as (server, kubeconfig):
        out = tmp_path / "out"
        out.mkdir()
        header = Header(
            run=scripted_api.RUN, prefix=scripted_api.PREFIX, namespace=scripted_api.NAMESPACE,
            template="scripted", fingerprint="f", kinds=[("batch/v1", "Job")],
        )  # fmt: skip
        (out / SUBMITTED).write_text(line(header))
        command = [sys.executable, "-m", "testbed", "scale", "sample", "-o", str(out)]
        command += ["--follow", "--timeout", "300", "--kubeconfig", str(kubeconfig)]
        follower = subprocess.Popen(
            command, cwd=ROOT, preexec_fn=_ignore_sigint,  # noqa: PLW1509 -- the point
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            assert server.stdout.readline().strip() == "done"  # the follower's watches ran
            follower.send_signal(signal.SIGINT)
            output, _ = follower.communicate(timeout=60)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate()
    assert follower.returncode == 0, output
    assert "watch event(s)" in output
    facts = sampled.load(out)
    assert len(facts.objects) == 3  # it saved what it had seen: every scripted Job
    assert json.loads((tmp_path / "truth.json").read_text())["sent"]
