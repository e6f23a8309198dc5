"""The local backend against real simulator child processes."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from testbed.backends.local import LocalBackend
from testbed.backends.local.readiness import http_status
from testbed.config.deployments import AnyDeployment, deployment_model
from testbed.core.errors import ServerStartError
from testbed.core.processes import kill_leftover


def sim(**params: Any) -> AnyDeployment:
    return deployment_model(raw_sim(**params))


def raw_sim(**params: Any) -> dict[str, Any]:
    return {
        "name": "sim",
        "server": "sim",
        "model": "sim-model",
        "params": params,
        "resources": {"cpu": 1},
        "startup_timeout_s": 20.0,
    }


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


async def test_provision_serves_then_stops_the_group(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    async with backend.provision("w1", sim(), tmp_path / "w1") as handle:
        host, port = handle.endpoint.base_url.removeprefix("http://").split(":")
        assert await http_status(host, int(port), "/health") == 200
        assert handle.endpoint.model == "sim-model"
        assert "tgi" in handle.endpoint.protocols
        assert handle.info["version"].startswith("sim")
        pid = handle.info["pid"]
        assert (tmp_path / "pids" / "w1.json").is_file()
    assert not alive(pid)
    assert not (tmp_path / "pids" / "w1.json").exists()
    assert (tmp_path / "w1" / "server.log").is_file()


async def test_crash_while_serving_resolves_died_with_log_tail(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    async with backend.provision("w1", sim(), tmp_path / "w1") as handle:
        os.kill(handle.info["pid"], signal.SIGKILL)
        async with asyncio.timeout(10):
            reason = await handle.died
    assert "exited with code -9 while serving" in reason
    assert "server.log" in reason


async def test_never_ready_is_a_start_error_with_the_log(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    deployment = raw_sim(faults={"slow_start_s": 30})
    deployment["startup_timeout_s"] = 0.5
    with pytest.raises(ServerStartError, match=r"not ready after 0\.5 s"):
        async with backend.provision("w1", deployment_model(deployment), tmp_path / "w1"):
            pass
    assert not list((tmp_path / "pids").glob("*.json"))


async def test_bad_server_arguments_fail_fast_with_the_reason(tmp_path: Path) -> None:
    """The reference server is started with a flag it does not know: its own argument
    parser refuses it before any model is loaded (the folder only has to exist), and the
    start error carries that complaint from the server's log — at once, not after the
    readiness timeout."""
    backend = LocalBackend(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    deployment = raw_sim(extra_args=["--no-such-flag"])
    deployment["server"] = "hf"
    deployment["model"] = str(model)
    deployment["startup_timeout_s"] = 600.0
    with pytest.raises(ServerStartError) as err:
        async with backend.provision("w1", deployment_model(deployment), tmp_path / "w1"):
            pass
    message = str(err.value)
    assert "unrecognized arguments: --no-such-flag" in message  # the server's own words
    assert "exited with code 2" in message, message  # it ended; no wait for the timeout
    assert not list((tmp_path / "pids").glob("*.json"))


async def test_leftover_cleanup_ends_a_recorded_group(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec("sleep", "60", start_new_session=True)
    pid_file = tmp_path / "pids" / "old.json"
    pid_file.parent.mkdir()
    start = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    pid_file.write_text(f'{{"pid": {proc.pid}, "start": "{start}"}}')
    message = kill_leftover(pid_file)
    assert message is not None
    assert f"{proc.pid}" in message
    async with asyncio.timeout(5):
        assert await proc.wait() == -signal.SIGKILL
    assert not pid_file.exists()


async def test_leftover_with_a_reused_pid_is_left_alone(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec("sleep", "60", start_new_session=True)
    pid_file = tmp_path / "old.json"
    pid_file.write_text(f'{{"pid": {proc.pid}, "start": "1"}}')  # another process's start time
    try:
        assert kill_leftover(pid_file) is None
        assert proc.returncode is None
    finally:
        proc.kill()
        await proc.wait()
