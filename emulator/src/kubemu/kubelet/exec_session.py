"""``pods/{name}/exec``: a command run beside a container, as ``kubectl exec`` expects.

The emulator's containers are host processes, so an exec is a host process too: the command
runs with the container's environment and working directory (as exec probes do), under the
same shim as containers (its whole process group dies with the emulator), and is killed
when the client goes away or the pod stops (exit code 137, as kubectl reports it).

The stream is the ``v5.channel.k8s.io`` (kubectl 1.30+) or ``v4.channel.k8s.io`` (the Python
client's ``kubernetes.stream.stream``) websocket protocol: every binary frame starts with its
channel — 0 stdin, 1 stdout, 2 stderr, 3 the closing ``Status``, 4 resize; in v5 the client
closes stdin with ``[255, 0]``. The ``Status`` is ``Success``, or ``NonZeroExitCode`` with
the exit code as its cause, which kubectl turns into its own exit code; a command that cannot
start is an ``InternalError`` worded as containerd words it. With ``tty`` the command gets a
pseudo-terminal as its controlling tty (``kubectl exec -it POD -- sh``): everything it
prints comes on stdout, resize frames set the terminal's size, and stdin's close is ^D.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import signal
import struct
import termios
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import WSMsgType, web

from kubefacts.process_group import die_with_parent, signal_group
from kubemu.kubelet.process import exit_code, on_path, under_shim
from kubemu.machinery.handlers import query_flag
from kubemu.storage.errors import bad_request

if TYPE_CHECKING:
    from kubemu.kubelet.container import ContainerRunner
    from kubemu.kubelet.kubelet import Kubelet
    from kubemu.kubelet.pod import PodRuntime

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def _runner(
    kubelet: Kubelet, namespace: str, name: str, wanted: str | None
) -> tuple[ContainerRunner, PodRuntime]:
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
            return runner, runtime
    raise bad_request(f'unable to upgrade connection: container not found ("{wanted}")')


async def serve_exec(
    kubelet: Kubelet, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    command = request.query.getall("command", [])
    if not command:
        raise bad_request("you must specify at least one command for the container")
    runner, runtime = _runner(kubelet, namespace, name, request.query.get("container"))
    ws = web.WebSocketResponse(protocols=PROTOCOLS, autoping=True, max_msg_size=0)
    if not ws.can_prepare(request).ok:
        raise bad_request("Upgrade request required")
    await ws.prepare(request)
    try:
        stdin, tty = (query_flag(request.query.get(name)) for name in ("stdin", "tty"))
        code, message = await _run(ws, runner, runtime.stopped, command, stdin, tty)
        with contextlib.suppress(ConnectionResetError):  # the client left: nobody to tell
            await ws.send_bytes(bytes([ERROR]) + orjson.dumps(_status(command, code, message)))
    finally:
        await ws.close()
    return ws


async def _run(
    ws: web.WebSocketResponse,
    runner: ContainerRunner,
    pod_stopped: asyncio.Event,
    command: list[str],
    stdin: bool,
    tty: bool,
) -> tuple[int, str]:
    env = runner.launch.env
    if not on_path(command[0], env):
        return -1, (
            "Internal error occurred: error executing command in container: failed to exec in"
            " container: failed to start exec: OCI runtime exec failed: exec failed: unable to"
            f' start container process: exec: "{command[0]}": executable file not found in'
            " $PATH: unknown"
        )
    io = await (_Terminal.start if tty else _Pipes.start)(command, env, runner.launch.cwd, stdin)
    feeder = asyncio.create_task(_from_client(ws, io))
    pod_gone: asyncio.Future[Any] = asyncio.ensure_future(pod_stopped.wait())
    work: asyncio.Future[Any] = asyncio.gather(
        *(_pump(reader, ws, channel) for reader, channel in io.outputs), io.process.wait()
    )
    try:
        await asyncio.wait([work, pod_gone], return_when=asyncio.FIRST_COMPLETED)
    finally:
        feeder.cancel()
        pod_gone.cancel()
        # What it left behind; all of it if the client left or the pod stopped under it. The
        # shim leads the group, so this kills it too; never io.process.kill(), which can reap
        # the shim before asyncio's watcher does and turn its 137 into 255 (signal_child).
        signal_group(io.process.pid, signal.SIGKILL)
        await io.process.wait()
        await asyncio.wait([work], timeout=2)  # the rest of its output
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        io.close()
    return exit_code(io.process.returncode or 0), ""


class _Pipes:
    """stdout and stderr apart; stdin a pipe when the client sends it."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        assert process.stderr is not None
        self.process = process
        self.outputs = [(process.stdout, STDOUT), (process.stderr, STDERR)]

    @classmethod
    async def start(
        cls, command: list[str], env: dict[str, str], cwd: Path | None, stdin: bool
    ) -> _Pipes:
        pipe = asyncio.subprocess.PIPE
        return cls(
            await under_shim(
                command,
                env,
                cwd,
                stdin=pipe if stdin else asyncio.subprocess.DEVNULL,
                stdout=pipe,
                stderr=pipe,
            )
        )

    async def write(self, data: bytes) -> None:
        if self.process.stdin is not None:
            self.process.stdin.write(data)
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                await self.process.stdin.drain()

    def close_stdin(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()

    def resize(self, width: int, height: int) -> None:
        """No terminal, nothing to resize."""

    def close(self) -> None:
        """The pipes close with the process."""


class _Terminal:
    """A pseudo-terminal: the command's controlling tty; everything it prints is stdout."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        master: int,
        reader: asyncio.StreamReader,
        transport: asyncio.BaseTransport,
    ) -> None:
        self.process, self.master, self.transport = process, master, transport
        self.outputs = [(reader, STDOUT)]

    @classmethod
    async def start(
        cls, command: list[str], env: dict[str, str], cwd: Path | None, stdin: bool
    ) -> _Terminal:
        master, slave = pty.openpty()

        def controlling_tty() -> None:  # in the child, after setsid
            die_with_parent()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        try:
            process = await under_shim(
                command,
                {"TERM": "xterm", **env},
                cwd,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                preexec_fn=controlling_tty,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        reader = asyncio.StreamReader()
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(master, "rb", 0, closefd=False)
        )
        return cls(process, master, reader, transport)

    async def write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.master, data)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.master, b"\x04")  # end of input, as a terminal says it

    def resize(self, width: int, height: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    def close(self) -> None:
        self.transport.close()
        with contextlib.suppress(OSError):
            os.close(self.master)


async def _pump(reader: asyncio.StreamReader, ws: web.WebSocketResponse, channel: int) -> None:
    prefix = bytes([channel])
    with contextlib.suppress(OSError):  # a terminal's end reads as EIO
        while chunk := await reader.read(65536):
            with contextlib.suppress(ConnectionResetError):
                await ws.send_bytes(prefix + chunk)


async def _from_client(ws: web.WebSocketResponse, io: _Pipes | _Terminal) -> None:
    """Client → command: stdin, stdin's close (v5), resizes; the client leaving kills it."""
    async for message in ws:
        if message.type == WSMsgType.TEXT:  # the Python client sends str data as text frames
            frame = str(message.data).encode()
        elif message.type == WSMsgType.BINARY:
            frame = bytes(message.data)
        else:
            continue
        if not frame:
            continue
        channel, payload = frame[0], frame[1:]
        if channel == STDIN:
            await io.write(payload)
        elif channel == CLOSE and payload[:1] == bytes([STDIN]):
            io.close_stdin()
        elif channel == RESIZE:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                size = orjson.loads(payload)
                io.resize(int(size["Width"]), int(size["Height"]))
    if io.process.returncode is None:
        signal_group(io.process.pid, signal.SIGKILL)


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
