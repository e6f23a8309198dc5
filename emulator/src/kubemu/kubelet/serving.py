"""The kubelet's API subresources: ``pods/{name}/log``, ``/portforward`` and ``/exec``.

``log`` answers like the real server: plain text, ``container`` required when the pod has
several, ``previous``, ``tailLines``, ``timestamps``, ``limitBytes`` and ``follow`` (a
chunked stream until the container's run ends), and the real 400 messages when there is
nothing to show yet.

``portforward`` speaks the ``v4.channel.k8s.io`` websocket protocol as
``kubernetes.stream.portforward`` and the real kubelet do: for the i-th port of ``?ports=``
channel 2i carries data and 2i+1 errors; the server's first frame on each channel is the
channel byte and the port number (two bytes, little-endian); every later frame is the
channel byte and a payload. Each websocket carries one TCP connection per port, to the
127.0.0.1 port the kubelet gave that container port.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from kubemu.kubelet import tunnel
from kubemu.kubelet.exec_session import serve_exec
from kubemu.kubelet.logs import follow, render
from kubemu.machinery.handlers import SubresourceHost
from kubemu.storage.errors import ApiError, bad_request

if TYPE_CHECKING:
    from kubemu.kubelet.kubelet import Kubelet
    from kubemu.kubelet.pod import PodRuntime

PROTOCOLS = ("v4.channel.k8s.io",)


def register(server: SubresourceHost, kubelet: Kubelet) -> None:
    """Serve the three subresources on ``server`` (the API server) from ``kubelet``."""

    async def log(request: web.Request, namespace: str | None, name: str) -> web.StreamResponse:
        return await serve_log(kubelet, request, namespace or "default", name)

    async def portforward(
        request: web.Request, namespace: str | None, name: str
    ) -> web.StreamResponse:
        return await serve_portforward(kubelet, request, namespace or "default", name)

    async def exec_(request: web.Request, namespace: str | None, name: str) -> web.StreamResponse:
        return await serve_exec(kubelet, request, namespace or "default", name)

    server.add_subresource("pods", "log", log)
    server.add_subresource("pods", "portforward", portforward)
    server.add_subresource("pods", "exec", exec_)


def _container_name(pod: dict[str, Any], wanted: str | None) -> str:
    spec = pod.get("spec") or {}
    names = [
        c["name"] for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    ]
    name = pod["metadata"]["name"]
    if wanted:
        if wanted not in names:
            raise bad_request(f"container {wanted} is not valid for pod {name}")
        return wanted
    apps = [c["name"] for c in spec.get("containers") or []]
    if len(apps) == 1:
        return str(apps[0])
    raise bad_request(
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(apps)}]"
    )


async def serve_log(
    kubelet: Kubelet, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    if request.method != "GET":
        raise ApiError(405, "MethodNotAllowed", f"{request.method} is not allowed on pods/log")
    pod = kubelet.store.get("pods", namespace, name)
    query = request.query
    container = _container_name(pod, query.get("container"))
    previous = query.get("previous") in ("true", "1")
    run = kubelet.host.logbook.find(namespace, name, container, previous)
    if run is None:
        if previous:
            raise bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        reason = _waiting_reason(pod, container)
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    timestamps = query.get("timestamps") in ("true", "1")
    tail = int(query["tailLines"]) if query.get("tailLines", "").lstrip("-").isdigit() else None
    limit = int(query["limitBytes"]) if query.get("limitBytes", "").isdigit() else None
    if query.get("follow") not in ("true", "1"):
        body = render(run.lines(), timestamps, tail)
        return web.Response(body=body[:limit] if limit else body, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    sent = 0
    with contextlib.suppress(ConnectionResetError):
        async for chunk in follow(run, timestamps, tail):
            part = chunk if limit is None else chunk[: max(limit - sent, 0)]
            if part:
                await response.write(part)
                sent += len(part)
            if limit is not None and sent >= limit:
                break
        await response.write_eof()
    return response


def _waiting_reason(pod: dict[str, Any], container: str) -> str:
    status = pod.get("status") or {}
    for entry in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        if entry.get("name") == container:
            return str(
                ((entry.get("state") or {}).get("waiting") or {}).get("reason")
                or "ContainerCreating"
            )
    return "ContainerCreating"


def _ports(request: web.Request) -> list[int]:
    raw = [p for value in request.query.getall("ports", []) for p in value.split(",") if p]
    try:
        ports = [int(p) for p in raw]
    except ValueError as exc:
        raise bad_request(f"invalid port in {raw}: {exc}") from exc
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise bad_request("at least one valid port number (1-65535) is required in ?ports=")
    return ports


def _notes(runtime: PodRuntime) -> dict[int, str]:
    """Why a port cannot answer: its container runs no process here (an unknown image)."""
    return {
        int(port["containerPort"]): (
            f"container {runner.name} runs no process on the emulator: image"
            f" {runner.record.image} is neither a testbed nor a vLLM image"
            + (
                " (start the emulator with --tgi-stand-in to play it with testbed's reference"
                " server)"
                if re.search(runtime.host.rules.tgi_pattern, runner.record.image)
                else ""
            )
        )
        for runner in runtime.runners
        if runner.launch.argv is None
        for port in runner.spec.get("ports") or []
        if "containerPort" in port
    }


async def serve_portforward(
    kubelet: Kubelet, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    pod = kubelet.store.get("pods", namespace, name)
    offered = {p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")}
    tunnelled = tunnel.PROTOCOL in offered  # kubectl: ports come in the SPDY streams
    ports = [] if tunnelled else _ports(request)
    runtime = kubelet.runtime(namespace, name)
    if runtime is None or (pod.get("status") or {}).get("phase") != "Running":
        phase = (pod.get("status") or {}).get("phase", "Pending")
        raise bad_request(
            f"unable to upgrade connection: pod does not exist or is not running ({phase})"
        )
    protocols = (tunnel.PROTOCOL,) if tunnelled else PROTOCOLS
    ws = web.WebSocketResponse(protocols=protocols, autoping=True, max_msg_size=0)
    await ws.prepare(request)
    uid = pod["metadata"]["uid"]
    if tunnelled:
        try:
            await tunnel.Tunnel(ws, runtime.ports, uid, _notes(runtime)).run()
        finally:
            await ws.close()
        return ws
    streams: list[asyncio.StreamWriter | None] = []
    readers: list[asyncio.Task[None]] = []
    try:
        for index, port in enumerate(ports):
            data, error = bytes([2 * index]), bytes([2 * index + 1])
            prefix = port.to_bytes(2, "little")
            await ws.send_bytes(data + prefix)
            await ws.send_bytes(error + prefix)
            host_port = runtime.ports.get(port, port)
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", host_port)
            except OSError as exc:
                note = _notes(runtime).get(port, "")
                await ws.send_bytes(error + tunnel.forward_error(port, uid, exc, note).encode())
                streams.append(None)
                continue
            streams.append(writer)
            readers.append(asyncio.create_task(_pump(reader, ws, data)))
        await _from_client(ws, streams)
    finally:
        for task in readers:
            task.cancel()
        for stream in streams:
            if stream is not None:
                stream.close()
        await ws.close()
    return ws


async def _pump(reader: asyncio.StreamReader, ws: web.WebSocketResponse, channel: bytes) -> None:
    """Pod → client: each read becomes one frame on the data channel; EOF closes the socket."""
    with contextlib.suppress(ConnectionResetError, RuntimeError):
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            await ws.send_bytes(channel + chunk)
    await ws.close()


async def _from_client(
    ws: web.WebSocketResponse, streams: list[asyncio.StreamWriter | None]
) -> None:
    """Client → pod: a binary frame's first byte names the channel, the rest is payload."""
    async for message in ws:
        if message.type != WSMsgType.BINARY or not message.data:
            continue
        channel = message.data[0]
        index, is_error = divmod(channel, 2)
        if is_error or index >= len(streams):
            continue
        writer = streams[index]
        if writer is None:
            continue
        writer.write(message.data[1:])
        with contextlib.suppress(ConnectionResetError):
            await writer.drain()
