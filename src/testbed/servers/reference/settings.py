"""The reference server's settings: the hf deployment parameters plus what only matters when
serving by hand. Light on purpose (no torch): ``testbed serve hf`` validates them, and refuses
a bad one with exit 2, before the stacks load."""

from __future__ import annotations

from pydantic import Field

from testbed.config.deployments import HfParams

DEFAULT_MODEL = "bundled:smollm2-135m"


class ReferenceSettings(HfParams):
    """The hf deployment parameters plus what only matters when serving by hand."""

    batch_invariant: bool = Field(
        True,
        description="pad matrix products so a request's output never depends on its batch"
        " (about half the speed of one lone request; batches barely change)",
    )
    served_model_name: str | None = Field(None, description="name in /v1/models and requests")
