"""The one exception tree of testbed.

Every error a user can cause or meet is a :class:`TestbedError`; foreign exceptions are
translated at the boundary (``raise … from exc``). The base and its first kinds are
kubefacts' (:mod:`kubefacts.errors`, shared with the emulator, kubemu), so an error either
raises is a testbed error. Each class carries the exit code the
command line returns for it (DESIGN.md: 0 ok · 1 verdict failed · 2 bad input ·
3 infrastructure error · 5 nothing was tested · 130 interrupted).
"""

from __future__ import annotations

from kubefacts import errors as shared

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INPUT = shared.EXIT_INPUT
EXIT_INFRA = shared.EXIT_INFRA
#: The command tested nothing: every treatment (every case, every request) was skipped —
#: pytest's "no tests collected" (its 5, which CI systems already read as "not green").
EXIT_NOTHING_TESTED = 5
EXIT_INTERRUPTED = 130


#: The base of every testbed error (kubefacts' own): ``str(err)`` is the message a user reads.
TestbedError = shared.Error
#: The user's input is wrong: a campaign file, an option, a case file (exit 2).
InputError = shared.InputError
#: Something testbed depends on failed: a server did not start, a pod was evicted (exit 3).
InfrastructureError = shared.InfrastructureError


class CampaignError(InputError):
    """A campaign file is malformed or invalid; the message names file, line, field and fix."""


class ServerStartError(InfrastructureError):
    """A server process or pod never became ready."""


class ServerRefused(ServerStartError):
    """A server refused what it was given and exited before it was ready (its exit code 2:
    a bad flag, a folder that is no model). The same start fails the same way again, so
    it is not retried."""

    retryable = False


class ServerCannotStart(ServerStartError):
    """A server's pod failed for a cause a fresh start meets again — an image that cannot be
    pulled, a container that cannot be made from its configuration, a container that
    crash-loops with the same image and arguments. Not retried; the message says why."""

    retryable = False


class ServerCrashed(InfrastructureError):
    """A server exited while it was serving; the message carries the tail of its log."""


class ClusterError(InfrastructureError):
    """The Kubernetes API refused or failed a request; ``status`` is its HTTP status (0: none)."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class ClusterUnreachable(ClusterError):
    """The API server did not answer (wrong URL, network, TLS)."""


class ClusterAccessDenied(ClusterError):
    """401/403: the credentials are wrong or lack a permission (the message names it)."""


class ClusterNotFound(ClusterError):
    """404: the object (or its namespace, or its kind) does not exist."""


class ClusterConflict(ClusterError):
    """409: the object already exists, or changed since it was read."""


class MissingDependency(shared.MissingDependency):
    """An optional stack (torch, vLLM, kubernetes, boto3) is not installed; says how to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(package, f"pip install 'testbed[{extra}]' (or run `make setup`)")


class Interrupted(TestbedError):
    """The run was interrupted (Ctrl-C or SIGTERM); what was recorded is on disk."""

    exit_code = EXIT_INTERRUPTED
