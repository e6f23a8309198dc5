"""The protocols testbed writes by hand, for both sides of a connection.

A layer below the clients and the servers (which use them) and above ``core`` (errors,
clocks, ids): a wire fact lives here once, and the gRPC client and the simulator's gRPC
server speak it through the same code.

- :mod:`.h2`: HTTP/2 frames, settings and error codes, HPACK header blocks (encoding), the
  facts of gRPC over HTTP/2 (status codes, ``grpc-timeout``, ``grpc-message``);
- :mod:`.h2_connection`: one HTTP/2 connection state machine (framing, header blocks,
  SETTINGS, PING, flow control both ways, GOAWAY) that the client's
  ``clients.grpc_h2.GrpcConnection`` and the simulator's ``servers.sim.h2.H2ServerConnection``
  subclass with what their role adds.
"""
