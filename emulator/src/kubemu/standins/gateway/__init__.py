"""A Gateway API + GAIE implementation testbed plays on the emulator (``--gateway-stand-in``).

:mod:`.controller` programs Gateways of the class it owns and routes HTTPRoutes to Services and
InferencePools; :mod:`.proxy` is the data plane; :mod:`.epp` the endpoint picker's plugins as
llm-d configures them; :mod:`.scrape` reads the pool's metrics; :mod:`.objects` the objects
and statuses it reads and writes.
"""

from kubemu.standins.gateway.controller import GatewayStandIn
from kubemu.standins.gateway.objects import CONTROLLER_NAME

__all__ = ["CONTROLLER_NAME", "GatewayStandIn"]
