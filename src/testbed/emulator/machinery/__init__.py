"""What the controllers, the scheduler, the kubelet and the stand-ins share (Kubernetes keeps
the same in client-go): the controller loop, the event recorder, and the faults testbed injects.
"""
