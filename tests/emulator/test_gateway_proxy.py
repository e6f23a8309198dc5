"""The stand-in gateway's data plane (``standins/gateway/proxy.py``) in front of a real
simulator: streams pass through event by event with the picked endpoint named, a request no
rule matches is a 404, and a client that leaves mid-stream frees the server's slot."""

from __future__ import annotations

import asyncio
import json
import socket

import aiohttp

from kubemu.standins.gateway.proxy import DESTINATION, GatewayProxy, Rule
from testbed.config.sim import SimParams
from testbed.servers.sim import SimServer


class Fixed:
    def __init__(self, address: str) -> None:
        self.address = address

    def choose(self, prompt: str) -> tuple[str | None, str]:
        return self.address, ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def scenario() -> dict[str, object]:
    out: dict[str, object] = {}
    async with SimServer(SimParams(itl_ms=20)) as sim, aiohttp.ClientSession() as session:
        address = sim.url.removeprefix("http://")
        rules = [Rule("PathPrefix", "/v1", ((1.0, Fixed(address)),))]
        proxy = GatewayProxy("ns/gw", session, lambda: rules)
        port = free_port()
        await proxy.bind({80: port})
        try:
            body = {"prompt": "a b c", "max_tokens": 5, "stream": True}
            url = f"http://127.0.0.1:{port}/v1/completions"
            async with session.post(url, json=body) as resp:
                out["picked"] = resp.headers.get(DESTINATION)
                out["events"] = [line async for line in resp.content if line.strip()]
            async with session.get(f"http://127.0.0.1:{port}/health") as resp:
                out["unrouted"] = resp.status
            # a client that leaves after the first event
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            data = json.dumps({**body, "max_tokens": 200}).encode()
            writer.write(
                b"POST /v1/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%b" % (len(data), data)
            )
            await reader.readuntil(b"data:")
            out["running_during"] = sim.metrics.running
            writer.close()
            for _ in range(100):
                if sim.metrics.running == 0:
                    break
                await asyncio.sleep(0.02)
            out["running_after"] = sim.metrics.running
        finally:
            await proxy.close()
    return out


def test_streams_pass_through_and_a_departed_client_frees_the_server() -> None:
    out = asyncio.run(scenario())
    events = out["events"]
    assert isinstance(events, list)
    assert len(events) == 6  # five token events, then [DONE]
    assert events[-1].strip() == b"data: [DONE]"
    assert out["picked"].startswith("127.0.0.1:")  # type: ignore[union-attr]
    assert out["unrouted"] == 404
    assert out["running_during"] == 1
    assert out["running_after"] == 0
