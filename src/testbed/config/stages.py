"""``load.stages``: a list of fixed-rate stages run one after another within one treatment.

llm-d-benchmark's workload profiles (through inference-perf's ``load: {type: poisson,
stages: [{rate: 2, duration: 50}, …]}``) run several arrival rates in a row against one
deployment; each stage here is one of the ``rate`` profile's open-loop stages, with its own
window and figures (summary.json ``stages``, keyed by the stage's name). A stage's
``duration_s`` and ``requests`` bound it as the load's own fields bound every stage (see
docs/load.md, "How long a stage runs"); unset, the load's fields apply.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: A stage name: it becomes a key of summary.json (``stages.<name>.ttft_ms.p50``), so it
#: holds no dot and no space.
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_+-]*$"


class RateStage(BaseModel):
    """One open-loop stage: ``rate`` requests/s for ``duration_s`` or ``requests``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    rate: float = Field(gt=0, description="Mean arrival rate of this stage (requests/s).")
    duration_s: float | None = Field(
        None, gt=0, description="Issue requests for this long at most (s); unset: load.duration_s."
    )
    requests: int | None = Field(
        None, ge=1, description="Run exactly this many in this stage; unset: load.requests."
    )
    name: str | None = Field(
        None,
        pattern=_NAME,
        description="The stage's key in summary.json and the report (default rate-<rate>).",
    )

    def bounds(
        self, duration_s: float | None, requests: int | None, default_s: float
    ) -> tuple[float | None, int | None]:
        """This stage's (duration bound, request count): its own fields, else the load's;
        neither bounding it, the default duration (as :attr:`LoadProbe.stage_duration_s`)."""
        own = self.duration_s if self.duration_s is not None else duration_s
        counted = self.requests if self.requests is not None else requests
        if own is None and counted is None:
            own = default_s
        return own, counted

    @property
    def label(self) -> str:
        """The stage's name: given, or ``rate-<rate>`` as the rate profile names its stage,
        a fraction's dot as ``_`` (``rate-2_5``): the name is one part of dotted metric
        names (``stages.rate-2_5.ttft_ms.p50``)."""
        return self.name or f"rate-{self.rate:g}".replace(".", "_")


def stages_shorthand(value: Any) -> Any:
    """``"2:50,5:50"`` (rate:duration_s, as ``testbed load --stages`` takes it) to the list;
    ``rate:Nr`` gives a request count instead of a duration. Anything else passes through
    for pydantic to judge."""
    if not isinstance(value, str):
        return value
    out = []
    for part in filter(None, (p.strip() for p in value.split(","))):
        rate, sep, bound = part.partition(":")
        stage: dict[str, Any] = {"rate": rate.strip()}
        if sep and bound.strip().endswith("r"):
            stage["requests"] = bound.strip()[:-1]
        elif sep:
            stage["duration_s"] = bound.strip()
        out.append(stage)
    return out


def check_stages(
    stages: list[RateStage],
    profile: str,
    rate: float | None,
    dataset_kind: str,
    bounds: tuple[float | None, int | None, float],
    margins_s: float,
) -> None:
    """The rules of a stage list (ValueError for pydantic, which adds the file and line).
    ``bounds`` is the load's (duration_s, requests, default duration)."""
    if dataset_kind == "trace":
        raise ValueError(
            "a trace brings its own send times, which rate `stages` would replace: remove"
            " `stages` (profile trace), or give a prompts dataset"
        )
    if profile != "rate":
        raise ValueError(
            f"`stages` are open-loop rate stages, run by profile 'rate' (not {profile!r}):"
            " set profile: rate, or remove `stages`"
        )
    if rate is not None:
        raise ValueError(
            "give `rate` (one stage) or `stages` (several, each with its rate), not both"
        )
    names = [s.label for s in stages]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(
            f"{', '.join(twice)} named twice (summary.json keys stages by name):"
            " give the repeated stages a `name` each"
        )
    for number, stage in enumerate(stages):
        own, _ = stage.bounds(*bounds)
        if own is not None and margins_s >= own:
            raise ValueError(
                f"stages[{number}] ({stage.label}): warmup_s + cooldown_s ({margins_s:g})"
                f" must be shorter than its duration_s ({own:g})"
            )
