"""The whole campaign: name, backend, deployments, matrix, probes, execution, presets."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from testbed.config.ab import AbProbe
from testbed.config.backend_settings import BackendSettings, LocalSettings
from testbed.config.correctness import CorrectnessProbe
from testbed.config.criteria import Criterion
from testbed.config.deployments import Deployment, Strict
from testbed.config.diagnostics import located
from testbed.config.execution import Execution
from testbed.config.load import LoadProbe
from testbed.config.matrix import Matrix
from testbed.config.protocols import FIELDS, unreachable
from testbed.config.scale import ScaleProbe
from testbed.config.steps import COMMAND_KEY, Steps


class Results(Strict):
    """Where results go beyond the run directory."""

    dir: str = Field("runs", description="parent of run directories, relative to the cwd")
    index: str | None = Field(
        None, description="results index: SQLAlchemy URL (default sqlite in the runs dir)"
    )
    upload: str | None = Field(None, description="s3://bucket/prefix to copy the run dir to")
    s3_endpoint_url: str | None = Field(None, description="for MinIO-compatible stores")
    thresholds: dict[str, str | float] = Field(
        default_factory=dict,
        description="testbed compare thresholds by metric pattern, e.g. {ttft_ms.p99: 10%}",
    )


class Campaign(Strict):
    """One campaign file, validated. ``presets`` are applied by the loader and kept here
    only so that ``testbed schema`` documents them."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="campaign name")
    description: str = ""
    backend: BackendSettings = Field(default_factory=LocalSettings)
    deployments: list[Deployment] = Field(default_factory=list)
    matrix: Matrix | None = None
    correctness: CorrectnessProbe | None = None
    load: LoadProbe | None = None
    ab: AbProbe | None = None
    scale: ScaleProbe | None = None
    execution: Execution = Field(default_factory=Execution)
    results: Results = Field(default_factory=Results)
    criteria: list[Criterion] = Field(
        default_factory=list,
        description="verdicts comparing treatments of the run: a metric, a baseline and"
        " candidates chosen by factor values, a margin",
    )
    presets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    vars: dict[str, Any] = Field(
        default_factory=dict, description="free-form values for templates ({{ vars.NAME }})"
    )
    steps: Steps = Field(default_factory=Steps, description="user steps by phase (TOPSAIL)")
    commands: dict[COMMAND_KEY, dict[str, Any]] = Field(
        default_factory=dict,
        description="named commands' arguments, by [prefix/]group.command[/suffix]",
    )

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict) and "probes" in value and value.get("kind") != "kubernetes":
            raise ValueError(
                f"backend.probes chooses where probes run in a cluster; the"
                f" {value.get('kind', 'local')} backend runs them here — remove probes, or"
                " use backend: kubernetes"
            )
        return {"kind": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _cross_section(self) -> Campaign:
        problem = self._reference_problem() or self._probe_problem() or self._criteria_problem()
        if problem is None:
            refused = self.backend.refusals(self.deployments)
            # a server the backend cannot run is the first thing to fix, then its protocols
            problem = refused[0] if refused else self._protocol_problem()
        if problem is not None:
            message, at = problem
            raise located(message, *at)
        return self

    def _criteria_problem(self) -> tuple[str, tuple[int | str, ...]] | None:
        """A criterion chooses treatments by matrix factors of a load probe."""
        if self.criteria and self.load is None:
            return ("criteria compare load metrics — add a load: section", ("criteria",))
        factors = dict(self.matrix.factors) if self.matrix is not None else {}
        for i, criterion in enumerate(self.criteria):
            choices: list[tuple[tuple[int | str, ...], dict[str, Any]]] = [
                (("baseline",), criterion.baseline),
                *((("candidates", j), c) for j, c in enumerate(criterion.candidates)),
            ]
            for where, chosen in choices:
                for key, value in chosen.items():
                    if key not in factors:
                        return (
                            f"'{key}' is not a matrix factor, so it chooses no treatment —"
                            f" use one of: {', '.join(factors) or '(no factors)'}",
                            ("criteria", i, *where),
                        )
                    if value not in factors[key]:
                        return (
                            f"{key}: {value!r} is not one of its levels {factors[key]}",
                            ("criteria", i, *where),
                        )
        return None

    def _probe_problem(self) -> tuple[str, tuple[int | str, ...]] | None:
        if not any((self.correctness, self.load, self.ab, self.scale)):
            return ("no probe configured — add a correctness:, load:, ab: or scale: section", ())
        if (self.correctness or self.load or self.ab) and not self.deployments:
            return ("probes need deployments — add a `deployments:` list", ("deployments",))
        if self.scale is not None and not self.backend.cluster:
            return (
                "scale: needs a cluster — set `backend: kubernetes` (with context/kubeconfig,"
                " e.g. the one `testbed cluster emulate` writes)",
                ("scale",),
            )
        if self.scale is not None and self.backend.remote_probes:
            return (
                "scale: submits and samples cluster objects itself, not through a server —"
                " backend.probes: cluster has nothing to run for it; use probes: controller",
                ("backend", "probes"),
            )
        return None

    def _protocol_problem(self) -> tuple[str, tuple[int | str, ...]] | None:
        """Each probe's protocol must be one its deployments serve (``config.protocols``)."""
        wanted: list[tuple[str, str | None, list[str] | None]] = []
        if self.correctness is not None:
            for part in self.correctness.split():
                wanted.append(("correctness", part.asks, part.deployments))
        if self.load is not None:
            wanted.append(("load", self.load.asks, self.load.deployments))
        if self.ab is not None:
            wanted.append(("ab", self.ab.asks, [self.ab.stable, self.ab.canary]))
        for section, asked, names in wanted:
            for d in self.deployments:
                problem = (
                    unreachable(section, asked, d) if names is None or d.name in names else None
                )
                if problem is not None:
                    return problem, (section, FIELDS[section])
        return None

    def _reference_problem(self) -> tuple[str, tuple[int | str, ...]] | None:
        """Names that must be unique, and names that must be deployments."""
        names = [d.name for d in self.deployments]
        for i, name in enumerate(names):
            if name in names[:i]:
                return (
                    f"deployment names must be unique; '{name}' is repeated — rename one",
                    ("deployments", i, "name"),
                )
        known = ", ".join(names) or "(none)"
        for role in ("stable", "canary"):
            named: str | None = getattr(self.ab, role) if self.ab else None
            if named is not None and named not in names:
                return (f"'{named}' is not a deployment; known: {known}", ("ab", role))
        for label, section in (("correctness", self.correctness), ("load", self.load)):
            for j, name in enumerate(section.deployments or [] if section else []):
                if name not in names:
                    return (
                        f"'{name}' is not a deployment; known: {known}",
                        (label, "deployments", j),
                    )
        ref = self.correctness.reference if self.correctness else None
        if ref is not None and ref not in names:
            return (
                f"'{ref}' is not a deployment; known: {known}",
                ("correctness", "reference"),
            )
        for i, suite in enumerate(self.correctness.suites if self.correctness else []):
            for j, name in enumerate(suite.deployments):
                if name not in names:
                    where: tuple[int | str, ...] = ("correctness", "suites", i, "deployments", j)
                    return (f"'{name}' is not a deployment; known: {known}", where)
        return None
