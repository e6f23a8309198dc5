"""``fmaas.GenerationService``, the gRPC interface of TGIS (see generation.proto).

``generation_pb2`` and ``generation_pb2_grpc`` are generated (``make proto``); do not edit them.
Importing them needs the ``tgis`` extra (``pip install 'testbed[tgis]'``).
"""
