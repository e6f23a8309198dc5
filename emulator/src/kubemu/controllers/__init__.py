"""The workload controllers of the emulated cluster: Deployments, ReplicaSets and Jobs.

Each runs a :class:`~kubemu.machinery.loop.ControllerLoop` over the store; the
control plane (:mod:`kubemu.plane`) starts them beside the scheduler and the kubelet.
"""
