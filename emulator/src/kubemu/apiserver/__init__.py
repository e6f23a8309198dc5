"""The API server's HTTP side: routes, verbs, discovery, OpenAPI, Tables, protobuf, watch streams.

:class:`~kubemu.apiserver.server.Emulator` owns the store and the HTTPS site;
:mod:`.api` answers requests against the store; the nodes of the cluster's shape are seeded
from :mod:`.nodes`. It knows nothing of the controllers, the scheduler or the kubelet: they
plug subresources (``pods/log``, ``exec``, ``portforward``) in through ``add_subresource``.
"""
