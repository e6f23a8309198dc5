"""What the controllers, the scheduler, the kubelet and the stand-ins share (Kubernetes keeps
the same in client-go): the controller loop, the event recorder, the faults testbed injects,
and the shape of the subresource handlers the kubelet plugs into the API server.
"""
