"""The ``scale:`` section: submit N workloads to a cluster and time their lifecycle (seed 003).

One :class:`ScaleProbe` is one scale test: how many workloads, how they are paced (iterations
of ``parallel`` submissions ``delay_s`` apart, or a steady ``rate``), which template and
values make one workload, how long to wait, and the thresholds that decide the verdict
(``p99 scheduled→running < 5 s``). Matrix factors address the fields by dotted path
(``scale.parallel``). Times are in seconds unless the name ends in ``_ms``.

The lifecycle stages a workload goes through are named here too, because thresholds name
them and are checked when the campaign is loaded.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from testbed.config.deployments import Strict

#: The lifecycle of one workload, in the order a healthy one goes through it.
#: ``submitted`` is the client's clock when the create call was sent; the rest come from
#: the cluster (events, conditions, fields) or the watch that saw them happen.
STAGES: tuple[str, ...] = (
    "submitted",
    "created",
    "pod_created",
    "scheduled",
    "initialized",
    "started",
    "running",
    "ready",
    "completed",
)
#: The stages the ``general`` plot and the default table of deltas show.
GENERAL_STAGES: tuple[str, ...] = ("submitted", "created", "scheduled", "running", "completed")

WorkloadType = Literal["training", "distributed", "interactive"]

_THRESHOLD = re.compile(
    r"^\s*(?P<stat>p\d{1,2}(?:\.\d+)?|max|median)\s+"
    r"(?P<start>[a-z_]+)\s*(?:→|->)\s*(?P<end>[a-z_]+)\s*"
    r"(?P<op><=|<)\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>ms|s)\s*$"
)


class StageThreshold(Strict):
    """``p99 scheduled→running < 5 s``: a quantile of the time between two stages, and its
    limit. Written as that string in a campaign; ``->`` works as well as ``→``."""

    quantile: float = Field(gt=0, le=1, description="0.99 for p99; 1 for max")
    start: str = Field(description="the stage the interval starts at")
    end: str = Field(description="the stage the interval ends at")
    inclusive: bool = Field(False, description="`<=` instead of `<`")
    limit_ms: float = Field(gt=0, description="the limit, milliseconds")
    text: str = Field("", description="as written")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        match = _THRESHOLD.match(value)
        if match is None:
            raise ValueError(
                f"threshold {value!r}: write e.g. 'p99 scheduled→running < 5 s'"
                " (pNN or max, two stages, < or <=, a number, ms or s)"
            )
        stat = match["stat"]
        quantile = 1.0 if stat == "max" else 0.5 if stat == "median" else float(stat[1:]) / 100
        scale = 1000.0 if match["unit"] == "s" else 1.0
        return {
            "quantile": quantile,
            "start": match["start"],
            "end": match["end"],
            "inclusive": match["op"] == "<=",
            "limit_ms": float(match["value"]) * scale,
            "text": " ".join(value.split()),
        }

    @model_validator(mode="after")
    def _known_stages(self) -> StageThreshold:
        for stage in (self.start, self.end):
            if stage not in STAGES:
                raise ValueError(
                    f"threshold {self.text or stage!r}: unknown stage {stage!r};"
                    f" stages are {', '.join(STAGES)}"
                )
        if STAGES.index(self.end) <= STAGES.index(self.start):
            raise ValueError(
                f"threshold {self.text!r}: {self.end} does not come after {self.start}"
                f" (order: {' → '.join(STAGES)})"
            )
        return self

    def label(self) -> str:
        return self.text or f"p{self.quantile * 100:g} {self.start}→{self.end}"


#: In a campaign file a threshold is a string; editors validate it with this schema.
_THRESHOLD_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": re.sub(r"\(\?P<\w+>", "(", _THRESHOLD.pattern),  # ECMA-262: no named groups
    "description": "pNN|max|median START→END <|<= VALUE ms|s, e.g. 'p99 scheduled→running < 5 s'",
}


class ScaleProbe(Strict):
    """Run:ai's scale test: submit workloads from a template, sample lifecycle timestamps,
    plot the stage deltas, judge them against thresholds."""

    workloads: int = Field(10, gt=0, description="workloads submitted in all")
    parallel: int = Field(1, gt=0, description="submitted together in each iteration")
    delay_s: float = Field(0.0, ge=0, description="pause between iterations, seconds")
    rate: float | None = Field(
        None, gt=0, description="workloads per second, evenly spaced (instead of delay_s)"
    )
    workload_type: WorkloadType = Field(
        "training", description="built-in template when `template` is not given"
    )
    template: str | None = Field(
        None, description="YAML template of one workload (any objects; relative to the campaign)"
    )
    workers: int = Field(1, gt=0, description="pods of a distributed workload")
    gpus: int = Field(1, ge=0, description="nvidia.com/gpu requested by each pod")
    pvc: bool = Field(False, description="add a PersistentVolumeClaim to each workload")
    gang: bool = Field(
        False,
        description="schedule each workload's pods as a gang: a PodGroup (scheduling.x-k8s.io)"
        " with minMember = workers, its pods labelled scheduling.x-k8s.io/pod-group",
    )
    priority_class: str | None = Field(
        None, description="spec.priorityClassName of every pod (the class must exist)"
    )
    run_seconds: float | None = Field(
        None, gt=0, description="training pods complete after this long (emulator and KWOK)"
    )
    image: str = Field("testbed/scale-workload:fake", description="container image of the pods")
    values: dict[str, Any] = Field(
        default_factory=dict, description="more template values ({{ key }} in the template)"
    )
    namespace: str | None = Field(None, description="default: the backend's, else testbed-scale")
    wait_for: str = Field(
        "running", description="the stage every workload must reach before the probe ends"
    )
    timeout_s: float = Field(600.0, gt=0, description="wait for all to reach `wait_for`")
    thresholds: list[Annotated[StageThreshold, WithJsonSchema(_THRESHOLD_SCHEMA)]] = Field(
        default_factory=list, description="e.g. ['p99 scheduled→running < 5 s']"
    )
    max_errors: int = Field(0, ge=0, description="more workloads in error than this → FAIL")
    plot: Literal["general", "detailed"] = Field("general", description="stages in the plots")
    skip_errors: bool = Field(True, description="leave failed workloads out of the plots")
    head: int | None = Field(None, gt=0, description="only the first N workloads in plots")
    tail: int | None = Field(None, gt=0, description="only the last N workloads in plots")
    cleanup: bool = Field(True, description="delete the submitted objects when the probe ends")

    @field_validator("wait_for")
    @classmethod
    def _stage(cls, value: str) -> str:
        if value not in STAGES[1:]:
            raise ValueError(f"unknown stage {value!r}; stages are {', '.join(STAGES[1:])}")
        return value

    @property
    def asks(self) -> str | None:
        """No protocol: scale submits cluster objects and asks no server anything."""
        return None

    def files(self) -> list[tuple[tuple[str | int, ...], str]]:
        """The campaign's files this section reads, each with where it is named: its
        workload template, when it is not a built-in one."""
        return [(("scale", "template"), self.template)] if self.template else []

    @model_validator(mode="after")
    def _pacing(self) -> ScaleProbe:
        if self.rate is not None and self.delay_s:
            raise ValueError(
                "rate and delay_s both set: choose one (rate spaces submissions evenly;"
                " delay_s pauses between iterations of `parallel`)"
            )
        if self.head is not None and self.tail is not None:
            raise ValueError("head and tail both set: choose one")
        return self
