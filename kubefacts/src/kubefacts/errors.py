"""The error base testbed and kubemu share: one tree, each class with its exit code.

Every error a user can cause or meet is an :class:`Error`; foreign exceptions are translated
at the boundary (``raise … from exc``). A command line returns the class's ``exit_code``
(2: the user's input is wrong, 3: something depended on failed). testbed's
``testbed.core.errors`` re-exports these names (``TestbedError`` is :class:`Error`) and adds
its own kinds below them, so an error kubefacts or kubemu raises is a testbed error too.
"""

from __future__ import annotations

EXIT_INPUT = 2
EXIT_INFRA = 3


class Error(Exception):
    """Base of every error of testbed, kubemu and kubefacts. ``str(err)`` is the message a
    user reads."""

    __test__ = False  # not a pytest test class
    exit_code = EXIT_INFRA


class InputError(Error):
    """The user's input is wrong: a campaign file, an option, an object's field."""

    exit_code = EXIT_INPUT


class InfrastructureError(Error):
    """Something depended on failed: a server did not start, a pod was evicted, S3 refused."""

    exit_code = EXIT_INFRA
    #: Whether trying again (``execution.retries``, fresh workers) may end otherwise.
    retryable = True


class MissingDependency(InfrastructureError):
    """An optional package is not installed; ``install`` says how to install it."""

    def __init__(self, package: str, install: str) -> None:
        super().__init__(f"{package} is not installed; install it with: {install}")
