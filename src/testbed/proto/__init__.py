"""Wire schemas testbed speaks, with the Python modules generated from them (grpcio-tools).

Below every layer: it imports nothing of testbed, so the clients and the servers that speak a
protocol can both use it.
"""
