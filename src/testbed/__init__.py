"""testbed: test and benchmark LLM inference deployments.

The public API is small on purpose: load a campaign, expand it into a plan, and the
exception tree. Everything else is reached through the ``testbed`` command line.
"""

from testbed.core.errors import (
    InfrastructureError,
    InputError,
    Interrupted,
    TestbedError,
)

__version__ = "0.1.0"

__all__ = [
    "InfrastructureError",
    "InputError",
    "Interrupted",
    "TestbedError",
    "__version__",
]
