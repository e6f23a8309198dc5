"""The local backend: servers are child processes on 127.0.0.1 of this machine."""

from testbed.backends.local.backend import LocalBackend

__all__ = ["LocalBackend"]
