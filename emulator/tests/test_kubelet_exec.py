"""``pods/{name}/exec`` on the emulator: kubectl exec (websocket v5) and the Python client's
``kubernetes.stream.stream`` (v4) run a command with the container's environment and get
its output and exit code; a command whose client leaves is killed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes.stream import stream

from kubemu.testing import Harness, alive, running_plane, wait_for

pytestmark = [pytest.mark.kubernetes]


def sleeper(name: str) -> dict:
    container = {
        "name": "main",
        "image": "quay.io/acme/testbed:dev",
        "command": ["python", "-c", "import time; time.sleep(600)"],
        "env": [{"name": "MODE", "value": "fast"}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]},
    }


def running(h: Harness, name: str) -> None:
    h.core.create_namespaced_pod("default", sleeper(name))
    wait_for(
        f"pod {name} to run",
        lambda: h.core.read_namespaced_pod(name, "default").status.phase == "Running",
    )


def exec_stream(h: Harness, command: list[str], stdin: bool = False, tty: bool = False) -> Any:
    """An exec of ``command`` in pod box through the Python client, not yet read."""
    return stream(
        h.core.connect_get_namespaced_pod_exec, "box", "default", command=command,
        stderr=True, stdin=stdin, stdout=True, tty=tty, _preload_content=False,
    )  # fmt: skip


def kubectl(h: Harness, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", f"--kubeconfig={h.kubeconfig}", "--request-timeout=20s", *args],
        check=False,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_kubectl_exec_runs_with_the_container_environment_and_returns_its_exit_code(
    tmp_path: Path,
) -> None:
    with running_plane(tmp_path) as h:
        running(h, "box")
        done = kubectl(h, "exec", "box", "--", "sh", "-c", "echo mode=$MODE; echo oops >&2; exit 7")
        assert done.returncode == 7, done.stderr
        assert done.stdout == "mode=fast\n"
        assert "oops" in done.stderr
        ok = kubectl(h, "exec", "box", "-c", "main", "--", "sh", "-c", "echo $HOSTNAME")
        assert (ok.returncode, ok.stdout) == (0, "box\n"), ok.stderr
        # stdin, closed by kubectl when its input ends (v5's close frame), reaches the command.
        fed = kubectl(h, "exec", "-i", "box", "--", "sh", "-c", "wc -l", stdin="a\nb\nc\n")
        assert (fed.returncode, fed.stdout.strip()) == (0, "3"), fed.stderr
        missing = kubectl(h, "exec", "box", "--", "no-such-command")
        assert missing.returncode == 1
        assert "Internal error occurred" in missing.stderr
        assert 'exec: "no-such-command": executable file not found in $PATH' in missing.stderr
        wrong = kubectl(h, "exec", "box", "-c", "sidecar", "--", "true")
        assert wrong.returncode != 0
        assert 'container not found ("sidecar")' in wrong.stderr


def test_the_python_client_streams_exec_output_and_a_departed_client_kills_the_command(
    tmp_path: Path,
) -> None:
    with running_plane(tmp_path) as h:
        running(h, "box")
        resp = exec_stream(h, ["sh", "-c", "echo out-$MODE; echo err >&2; exit 3"])
        resp.run_forever(timeout=20)
        assert resp.read_stdout() == "out-fast\n"
        assert resp.read_stderr() == "err\n"
        assert resp.returncode == 3
        # The client leaves its socket open when the server ends the stream (as the real API
        # server does once the command is done): shut it here.
        resp.sock.shutdown()

        resp = exec_stream(h, ["sh", "-c", "echo $$; exec sleep 600"])
        pid = int(wait_for("the command's pid", lambda: resp.update(1) or resp.read_stdout()))
        assert alive(pid)
        resp.close()
        resp.sock.shutdown()
        wait_for("the command to be killed", lambda: not alive(pid))

        # A command still running when its pod is deleted ends with the container: 137.
        resp = exec_stream(h, ["sh", "-c", "echo $$; exec sleep 600"])
        pid = int(wait_for("the command's pid", lambda: resp.update(1) or resp.read_stdout()))
        h.core.delete_namespaced_pod("box", "default")
        resp.run_forever(timeout=20)
        resp.sock.shutdown()
        assert resp.returncode == 137
        wait_for("the command to be gone", lambda: not alive(pid))


def test_with_tty_the_command_has_a_terminal_of_the_clients_size(tmp_path: Path) -> None:
    with running_plane(tmp_path) as h:
        running(h, "box")
        resp = exec_stream(h, ["sh"], stdin=True, tty=True)
        resp.write_channel(4, '{"Width": 100, "Height": 30}')
        resp.write_stdin("test -t 0 && echo is-a-tty; stty size; echo $TERM; exit 3\n")
        output = ""
        deadline = time.monotonic() + 20
        while resp.is_open() and time.monotonic() < deadline:
            resp.update(timeout=1)
            output += resp.read_stdout() if resp.peek_stdout() else ""
        assert "is-a-tty\r\n" in output
        assert "30 100\r\n" in output  # a terminal writes CR LF
        assert resp.returncode == 3
        resp.sock.shutdown()


def test_exec_refusals_before_the_upgrade(tmp_path: Path) -> None:
    with running_plane(tmp_path) as h:
        running(h, "box")
        path = "/api/v1/namespaces/default/pods/box/exec"
        bare = kubectl(h, "get", "--raw", path)
        assert "at least one command" in bare.stderr
        plain = kubectl(h, "get", "--raw", f"{path}?command=true")
        assert "Upgrade request required" in plain.stderr
