"""TOPSAIL's orchestration in a campaign: user steps in every phase, named commands whose
arguments come from the campaign, and the captures taken around treatments.

```yaml
vars: {pool: a100}                       # free-form values: presets and --set change them
steps:
  cleanup:                               # runs first, and again as the final cleanup
    - {name: uninstall, run: [helm, uninstall, x], on_error: continue}
  prepare:
    - {name: label, run: [kubectl, label, nodes, --all, "pool={{ vars.pool }}"]}
    - parallel:                          # siblings at once, joined before the next step
        - {name: warm, run: [scripts/warm.sh], timeout_s: 600}
        - {name: scale-up, command: cluster.set_scale, prefix: sutest, extra: {scale: 4}}
  test:
    - {name: snapshot-before, capture: [state]}                # before the treatments
    - {name: snapshot-after, capture: [state], when: after}    # after them
commands:                                # TOPSAIL's command_args.yaml.j2
  sutest/cluster.set_scale: {name: "{{ vars.machineset }}", scale: SET_AT_RUNTIME}
```

A step does exactly one thing: ``run`` an argv (a shell line only with ``shell: true``),
``command`` a named command of the toolbox (see :mod:`testbed.config.templating`), or
``capture`` the run's state. These models only check the shape; templates are rendered,
names resolved and toolbox scripts found by :func:`testbed.config.templating.plan_steps`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, StringConstraints, Tag, model_validator

from testbed.config.deployments import Strict
from testbed.config.diagnostics import located

STEP_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
#: ``[prefix/]group.command[/suffix]`` — a command of the toolbox and who it is for.
COMMAND_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_-]*\.[A-Za-z0-9_][A-Za-z0-9_-]*$"
SET_AT_RUNTIME = "SET_AT_RUNTIME"


class Step(Strict):
    """One step: an argv, a named command or a capture, in its own numbered folder."""

    name: str = Field(pattern=STEP_NAME, description="folder name part: NNN__<phase>__<name>")
    run: list[str] | str | None = Field(
        None, description="argv (Jinja-templated); one string only with shell: true"
    )
    shell: bool = Field(False, description="run: is one line for /bin/sh -c")
    command: str | None = Field(
        None, pattern=COMMAND_NAME, description="a toolbox command, group.command"
    )
    prefix: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_-]+$", description="commands: key prefix/… (TOPSAIL)"
    )
    suffix: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_-]+$", description="commands: key …/suffix (TOPSAIL)"
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="command arguments over the commands: entry's"
    )
    capture: list[Literal["state"]] | None = Field(
        None, min_length=1, description="dump the run's objects, events and logs"
    )
    timeout_s: float | None = Field(None, gt=0, description="seconds before the step is killed")
    on_error: Literal["stop", "continue"] = Field(
        "stop", description="stop: a failure is the run's ERROR; continue: noted only"
    )
    when: Literal["before", "after"] | None = Field(
        None, description="test steps only: before (default) or after the treatments"
    )

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        given = [k for k in ("run", "command", "capture") if getattr(self, k) is not None]
        if len(given) != 1:
            what = " and ".join(given) if given else "none"
            raise located(
                f"step {self.name!r} needs exactly one of run:, command:, capture: (got {what})",
            )
        if self.command is None:
            for field in ("prefix", "suffix", "extra"):
                if getattr(self, field):
                    raise located(
                        f"{field}: selects a named command's arguments — add command:, or"
                        f" remove {field}",
                        field,
                    )
        if self.shell and not isinstance(self.run, str):
            raise located(
                "shell: true runs one line with /bin/sh -c — write run: as a string", "run"
            )
        if isinstance(self.run, str) and not self.shell:
            raise located(
                "run: is an argv list (no shell), e.g. [kubectl, get, pods] — write a list,"
                " or set shell: true to run the line with /bin/sh -c",
                "run",
            )
        if isinstance(self.run, list) and not self.run:
            raise located("run: is empty — give the program and its arguments", "run")
        return self


class Parallel(Strict):
    """Steps run at once (TOPSAIL's ``run.Parallel``), each in its own numbered folder,
    all joined before the next step starts."""

    parallel: list[Step] = Field(min_length=1, description="steps run at once")
    when: Literal["before", "after"] | None = Field(
        None, description="test steps only: before (default) or after the treatments"
    )


def _item_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "parallel" if "parallel" in value else "step"
    return "parallel" if isinstance(value, Parallel) else "step"


Item = Annotated[
    Annotated[Step, Tag("step")] | Annotated[Parallel, Tag("parallel")],
    Discriminator(_item_kind),
]


class Steps(Strict):
    """The user's steps by phase, in TOPSAIL's order: cleanup → prepare → test → cleanup."""

    cleanup: list[Item] = Field(
        default_factory=list, description="before prepare (and again at the end)"
    )
    prepare: list[Item] = Field(default_factory=list, description="after the backend's prepare")
    test: list[Item] = Field(default_factory=list, description="around the treatments (when:)")
    final_cleanup: list[Item] | None = Field(
        None, description="at the end, also after an error or Ctrl-C (default: cleanup's steps)"
    )

    @model_validator(mode="after")
    def _names(self) -> Steps:
        for phase in ("cleanup", "prepare", "test", "final_cleanup"):
            seen: set[str] = set()
            for i, item in enumerate(getattr(self, phase) or []):
                if item.when is not None and phase != "test":
                    raise located(
                        f"when: places a test step around the treatments; {phase} steps run"
                        " in order — remove when:",
                        phase,
                        i,
                        "when",
                    )
                inner = item.parallel if isinstance(item, Parallel) else [item]
                for j, step in enumerate(inner):
                    at: tuple[str | int, ...] = (
                        (phase, i, "parallel", j) if isinstance(item, Parallel) else (phase, i)
                    )
                    if step.when is not None and isinstance(item, Parallel):
                        raise located(
                            "when: of a parallel step goes on its parallel: group", *at, "when"
                        )
                    if step.name in seen:
                        raise located(
                            f"step name {step.name!r} is repeated in {phase} — names make the"
                            " folders and --resume finds steps by them; rename one",
                            *at,
                            "name",
                        )
                    seen.add(step.name)
        return self


class PrometheusCapture(Strict):
    """Range queries of a cluster's Prometheus over each treatment's window."""

    url: str = Field(pattern=r"^https?://", description="Prometheus base URL (HTTP API /api/v1)")
    queries: dict[str, str] = Field(
        min_length=1, description="name → PromQL; each a plot in the report"
    )
    step_s: float = Field(5.0, gt=0, description="seconds between points of a range query")
    timeout_s: float = Field(10.0, gt=0, description="seconds per query before giving up")
    token: str | None = Field(None, description="bearer token, as ${env:NAME}")

    @model_validator(mode="after")
    def _token(self) -> PrometheusCapture:
        from testbed.core.secrets import is_reference

        if self.token is not None and not is_reference(self.token):
            raise located(
                "the Prometheus token must be a ${env:NAME} reference, never the secret itself",
                "token",
            )
        return self


class Capture(Strict):
    """What is captured around each treatment (TOPSAIL's capture_state, capture_prom)."""

    state: bool = Field(
        False, description="dump objects, events and logs before and after each treatment"
    )
    prometheus: PrometheusCapture | None = Field(
        None, description="range-query Prometheus over each treatment's window"
    )
    namespaces: list[
        Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    ] = Field(
        default_factory=list,
        description="more namespaces dumped whole by every state capture (an operator's, a"
        " stack's); kubernetes only",
    )


#: A ``commands:`` key: ``[prefix/]group.command[/suffix]``.
COMMAND_KEY = Annotated[
    str,
    StringConstraints(
        pattern=r"^([A-Za-z0-9_-]+/)?[A-Za-z0-9_][A-Za-z0-9_-]*\.[A-Za-z0-9_][A-Za-z0-9_-]*"
        r"(/[A-Za-z0-9_-]+)?$"
    ),
]


class LeaseSettings(Strict):
    """A coordination.k8s.io Lease that makes runs on a shared cluster take turns."""

    namespace: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="namespace of the Lease (created when missing), shared by every run",
    )
    name: str = Field(
        "testbed", pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", description="Lease name"
    )
    duration_s: int = Field(
        60, ge=5, le=3600, description="seconds without renewal after which the Lease expires"
    )
