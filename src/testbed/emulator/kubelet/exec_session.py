"""``pods/{name}/exec``: a command run beside a container, as ``kubectl exec`` expects.

The emulator's containers are host processes, so an exec is a host process too: the command
runs with the container's environment and working directory (as exec probes do), under the
same shim as containers (its whole process group dies with the emulator), and is killed
when the client goes away.

The stream is the ``v5.channel.k8s.io`` (kubectl 1.30+) or ``v4.channel.k8s.io`` (the Python
client's ``kubernetes.stream.stream``) websocket protocol: every binary frame starts with its
channel — 0 stdin, 1 stdout, 2 stderr, 3 the closing ``Status``, 4 resize; in v5 the client
closes stdin with ``[255, 0]``. The ``Status`` is ``Success``, or ``NonZeroExitCode`` with
the exit code as its cause, which kubectl turns into its own exit code; a command that cannot
start is an ``InternalError`` worded as containerd words it. Without a terminal emulation,
``tty`` is refused before the upgrade.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import WSMsgType, web

from testbed.core.process_group import die_with_parent, signal_group
from testbed.emulator.errors import bad_request
from testbed.emulator.kubelet.process import SHIM

if TYPE_CHECKING:
    from testbed.emulator.kubelet.container import ContainerRunner
    from testbed.emulator.kubelet.kubelet import Kubelet

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "") in ("1", "true", "True")


def _runner(kubelet: Kubelet, namespace: str, name: str, wanted: str | None) -> ContainerRunner:
    pod = kubelet.store.get("pods", namespace, name)
    runtime = kubelet.runtime(namespace, name)
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if runtime is None or phase != "Running":
        raise bad_request(f"unable to upgrade connection: pod {name} is not running ({phase})")
    apps = [r for r in runtime.runners if not r.record.init]
    if not wanted:
        if len(apps) != 1:
            names = " ".join(r.name for r in apps)
            raise bad_request(
                f"a container name must be specified for pod {name}, choose one of: [{names}]"
            )
        wanted = apps[0].name
    for runner in runtime.runners:
        if runner.name == wanted and "running" in runner.record.state:
            return runner
    raise bad_request(f'unable to upgrade connection: container not found ("{wanted}")')


async def serve_exec(
    kubelet: Kubelet, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    command = request.query.getall("command", [])
    if not command:
        raise bad_request("you must specify at least one command for the container")
    if _flag(request, "tty"):
        raise bad_request("the emulator runs exec commands without a terminal: leave out tty (-t)")
    runner = _runner(kubelet, namespace, name, request.query.get("container"))
    ws = web.WebSocketResponse(protocols=PROTOCOLS, autoping=True, max_msg_size=0)
    if not ws.can_prepare(request).ok:
        raise bad_request("Upgrade request required")
    await ws.prepare(request)
    try:
        code, message = await _run(ws, runner, command, _flag(request, "stdin"))
        with contextlib.suppress(ConnectionResetError):  # the client left: nobody to tell
            await ws.send_bytes(bytes([ERROR]) + orjson.dumps(_status(command, code, message)))
    finally:
        await ws.close()
    return ws


async def _run(
    ws: web.WebSocketResponse, runner: ContainerRunner, command: list[str], stdin: bool
) -> tuple[int, str]:
    env = runner.launch.env
    if shutil.which(command[0], path=env.get("PATH", os.defpath)) is None:
        return -1, (
            "Internal error occurred: error executing command in container: failed to exec in"
            " container: failed to start exec: OCI runtime exec failed: exec failed: unable to"
            f' start container process: exec: "{command[0]}": executable file not found in'
            " $PATH: unknown"
        )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        str(SHIM),
        *command,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=str(runner.launch.cwd) if runner.launch.cwd else None,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    feeder = asyncio.create_task(_from_client(ws, process))
    try:
        await asyncio.gather(
            _pump(process.stdout, ws, STDOUT), _pump(process.stderr, ws, STDERR), process.wait()
        )
    finally:
        feeder.cancel()
        signal_group(process.pid, signal.SIGKILL)  # what it left behind, or all if cancelled
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    code = process.returncode or 0
    return (128 - code if code < 0 else code), ""  # killed by signal N: 128 + N


async def _pump(reader: asyncio.StreamReader, ws: web.WebSocketResponse, channel: int) -> None:
    prefix = bytes([channel])
    while chunk := await reader.read(65536):
        with contextlib.suppress(ConnectionResetError):
            await ws.send_bytes(prefix + chunk)


async def _from_client(ws: web.WebSocketResponse, process: asyncio.subprocess.Process) -> None:
    """Client → command: stdin frames, stdin's close (v5); the client leaving kills it."""
    stdin = process.stdin
    async for message in ws:
        if message.type != WSMsgType.BINARY or not message.data:
            continue
        channel, payload = message.data[0], message.data[1:]
        if stdin is None:
            continue
        if channel == STDIN:
            stdin.write(payload)
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                await stdin.drain()
        elif channel == CLOSE and payload[:1] == bytes([STDIN]):
            stdin.close()
    if process.returncode is None:
        signal_group(process.pid, signal.SIGKILL)


def _status(command: list[str], code: int, message: str) -> dict[str, Any]:
    """The closing Status: exit code 0, N > 0, or -1 (could not start, ``message`` says why)."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    if code < 0:
        return {
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "InternalError",
            "code": 500,
        }
    return {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: error executing command"
        f" {command}, exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }
