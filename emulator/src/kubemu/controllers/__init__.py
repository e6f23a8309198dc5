"""The workload controllers of the emulated cluster: Deployments, ReplicaSets and Jobs.

Each runs a :class:`~testbed.emulator.machinery.loop.ControllerLoop` over the store; the
control plane (:mod:`testbed.emulator.plane`) starts them beside the scheduler and the kubelet.
"""
