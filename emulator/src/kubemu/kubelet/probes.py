"""Readiness, liveness and startup probes against a container's host ports.

``httpGet`` succeeds on a status from 200 to 399, ``tcpSocket`` when a connection opens,
``exec`` when the command exits 0 (run on the host with the container's environment).
Named ports resolve through the container's ``ports``; numbers through the port map the
kubelet made. Timing follows the probe's fields with the API's defaults
(``initialDelaySeconds`` 0, ``periodSeconds`` 10, ``timeoutSeconds`` 1,
``failureThreshold`` 3, ``successThreshold`` 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubefacts.process_group import signal_child


@dataclass(frozen=True)
class Timing:
    initial_delay_s: float
    period_s: float
    timeout_s: float
    failure_threshold: int
    success_threshold: int

    @classmethod
    def of(cls, probe: Mapping[str, Any]) -> Timing:
        return cls(
            initial_delay_s=float(probe.get("initialDelaySeconds") or 0),
            period_s=float(probe.get("periodSeconds") or 10),
            timeout_s=float(probe.get("timeoutSeconds") or 1),
            failure_threshold=int(probe.get("failureThreshold") or 3),
            success_threshold=int(probe.get("successThreshold") or 1),
        )


def host_port(port: Any, container: Mapping[str, Any], ports: Mapping[int, int]) -> int | None:
    """The 127.0.0.1 port a probe's ``port`` (number or name) reaches."""
    if isinstance(port, str) and not port.isdigit():
        named = [p for p in container.get("ports") or [] if p.get("name") == port]
        if not named:
            return None
        port = named[0]["containerPort"]
    number = int(port)
    return ports.get(number, number)


async def check(
    probe: Mapping[str, Any],
    container: Mapping[str, Any],
    ports: Mapping[int, int],
    env: Mapping[str, str],
) -> tuple[bool, str]:
    """Run the probe once: (success, the failure's message as the kubelet words it)."""
    timeout_s = Timing.of(probe).timeout_s
    try:
        async with asyncio.timeout(timeout_s):
            if "httpGet" in probe:
                return await _http(probe["httpGet"], container, ports)
            if "tcpSocket" in probe:
                return await _tcp(probe["tcpSocket"], container, ports)
            if "exec" in probe:
                return await _exec(probe["exec"], env)
    except TimeoutError:
        return False, f"Probe timed out after {timeout_s:g}s"
    return True, ""


async def _http(
    spec: Mapping[str, Any], container: Mapping[str, Any], ports: Mapping[int, int]
) -> tuple[bool, str]:
    port = host_port(spec.get("port"), container, ports)
    path = str(spec.get("path") or "/")
    url = f"http://127.0.0.1:{port}{path}"
    if port is None:
        return False, f"Get {url!r}: unknown port {spec.get('port')!r}"
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False, f'Get "{url}": dial tcp 127.0.0.1:{port}: connect: connection refused'
    try:
        headers = "".join(f"{h['name']}: {h['value']}\r\n" for h in spec.get("httpHeaders") or [])
        request = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-probe/1.32\r\n"
            f"Accept: */*\r\n{headers}Connection: close\r\n\r\n"
        )
        writer.write(request.encode())
        await writer.drain()
        status_line = await reader.readline()
    except OSError as exc:
        return False, f'Get "{url}": {exc}'
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    parts = status_line.decode("latin-1").split()
    code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if 200 <= code < 400:
        return True, ""
    return False, f"HTTP probe failed with statuscode: {code}"


async def _tcp(
    spec: Mapping[str, Any], container: Mapping[str, Any], ports: Mapping[int, int]
) -> tuple[bool, str]:
    port = host_port(spec.get("port"), container, ports)
    if port is None:
        return False, f"unknown port {spec.get('port')!r}"
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False, f"dial tcp 127.0.0.1:{port}: connect: connection refused"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True, ""


async def _exec(spec: Mapping[str, Any], env: Mapping[str, str]) -> tuple[bool, str]:
    command = [str(part) for part in spec.get("command") or []]
    if not command:
        return False, "exec probe without a command"
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
        )
    except OSError as exc:
        return False, str(exc)
    try:
        output, _ = await process.communicate()
    except asyncio.CancelledError:
        signal_child(process, signal.SIGKILL)  # not process.kill(): see signal_child
        await process.wait()
        raise
    if process.returncode == 0:
        return True, ""
    return False, output.decode(errors="replace").strip()[-300:]
