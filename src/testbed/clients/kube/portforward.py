"""A pod's port on 127.0.0.1: ``kubernetes.stream.portforward`` bridged to a local listener.

testbed's HTTP clients speak plain TCP to a base URL, so the bridge gives them one: each
connection accepted on ``127.0.0.1:<port>`` opens its own port-forward websocket to the pod
(``v4.channel.k8s.io``, as ``kubectl port-forward`` does) and bytes are pumped both ways
until either side closes. One connection per websocket keeps streams independent, so a
load test's concurrent keep-alive connections do not share one channel.

A connection the pod answers with nothing but a message on the error channel (the kubelet's
"failed to connect to localhost:PORT": nothing listens there) is handed to ``on_refused``,
so a server that stopped listening is reported in the kubelet's words, not as a connection
closed mid-response.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from testbed.clients.kube.errors import translate
from testbed.core.errors import ClusterAccessDenied, ClusterError

HOST = "127.0.0.1"
_CHUNK = 65536


class PortForward:
    """``async with PortForward(api_client, ns, pod, port) as local_port: …``"""

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        pod: str | Sequence[str],
        port: int,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        """``pod``: one pod, or several that take the connections in turn (a Service's
        ready pods: load spread over them as the Service would, not all on one)."""
        from kubernetes import client

        # kubernetes.stream swaps the ApiClient's call_api while it opens a websocket: on a
        # shared client, other threads' requests would go out as websockets meanwhile. The
        # bridge has a client of its own, and opens one session at a time on it.
        self.api_client = client.ApiClient(api_client.configuration)
        self._opening = threading.Lock()
        self.pods = [pod] if isinstance(pod, str) else list(pod)
        self._turn = itertools.cycle(self.pods)
        self.namespace, self.pod, self.port = namespace, self.pods[0], port
        self.on_refused = on_refused
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.local_port = 0

    async def __aenter__(self) -> int:
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        self.local_port = int(self._server.sockets[0].getsockname()[1])
        return self.local_port

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()
        self.api_client.close()  # type: ignore[no-untyped-call]

    def _open(self) -> tuple[Any, socket.socket]:
        """A port-forward session to the next pod (blocking: the websocket handshake)."""
        from kubernetes import client
        from kubernetes.stream import portforward

        pod = self.pod
        try:
            core = client.CoreV1Api(self.api_client)
            with self._opening:
                pod = next(self._turn)
                session = portforward(
                    core.connect_get_namespaced_pod_portforward,
                    pod,
                    self.namespace,
                    ports=str(self.port),
                )
        except Exception as exc:
            raise translate(exc, f"port-forward to pod {pod}:{self.port}") from exc
        wrapped = session.socket(self.port)
        raw: socket.socket = getattr(wrapped, "_socket", wrapped)
        return session, raw

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        session = None
        try:
            session, raw = await asyncio.to_thread(self._open)
            remote_reader, remote_writer = await asyncio.open_connection(sock=raw)
            pumps = [
                asyncio.ensure_future(_pump(reader, remote_writer)),
                asyncio.ensure_future(_pump(remote_reader, writer)),
            ]
            try:
                # Either side closing ends the connection: HTTP clients close first, and the
                # forwarded stream may never signal EOF back.
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
                remote_writer.close()
            answered = pumps[1].done() and not pumps[1].cancelled() and pumps[1].result() > 0
            message = session.error(self.port)
            if message and not answered and self.on_refused is not None:
                self.on_refused(message)
        except ClusterAccessDenied as exc:
            # RBAC refused the port-forward: the connection just closes, so say why
            if self.on_refused is not None:
                self.on_refused(str(exc))
        except ClusterError:
            pass  # the client sees its connection closed and reports that
        except asyncio.CancelledError:
            # The bridge is closing: this handler task belongs to the listener, and asyncio's
            # server callback would report a cancelled handler as an error.
            pass
        finally:
            writer.close()
            if session is not None:
                with contextlib.suppress(Exception):
                    session.close()
            self._tasks.discard(task)  # type: ignore[arg-type]


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> int:
    """Copy until EOF; the bytes copied."""
    copied = 0
    try:
        while data := await source.read(_CHUNK):
            sink.write(data)
            copied += len(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            if sink.can_write_eof():
                sink.write_eof()
    return copied
