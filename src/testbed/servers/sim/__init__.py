"""The built-in inference simulator: OpenAI and TGI protocols with a known latency model.

Public API::

    async with running_sim(SimParams(ttft_ms=20, itl_ms=5)) as url: ...
    async with SimServer(params) as server: server.url, server.metrics
    with serve_in_thread(params) as url: ...   # sync code

Parameters are :class:`testbed.config.sim.SimParams`.
"""

from testbed.servers.sim.loop import precise_event_loop
from testbed.servers.sim.server import SimServer, running_sim, serve, serve_in_thread

__all__ = ["SimServer", "precise_event_loop", "running_sim", "serve", "serve_in_thread"]
