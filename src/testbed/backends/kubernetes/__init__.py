"""Workers as pods of a Kubernetes cluster (see :mod:`.backend`); manifests as pure functions."""

from testbed.backends.kubernetes.backend import KubernetesBackend

__all__ = ["KubernetesBackend"]
