"""Steps made concrete: templates rendered from the resolved campaign, named commands resolved,
every step numbered in execution order — pure, so ``plan``, ``validate`` and ``run`` agree.

Templates are Jinja, rendered in :mod:`testbed.core.templates`' sandbox (they read the
campaign's values, never Python's objects or another file): a name the campaign does not
have, or anything the sandbox refuses, is a :class:`CampaignError` (exit 2) at the line of
the template. They see the resolved
campaign (``vars``, ``deployments`` — also by name: ``deployments.stable.model`` —, ``load``,
``backend``, ``execution`` …) and ``run`` (``id``, ``dir``, ``namespace``; placeholders when
planning). ``${env:NAME}`` references pass through rendering untouched: the plan and the
step folders show them as ``***``, the child gets the value.

A named command (``command: cluster.set_scale``) is TOPSAIL's ``run_toolbox_from_config``:
its arguments are the ``commands:`` entry ``[prefix/]cluster.set_scale[/suffix]``, rendered,
then the step's ``extra`` over them (extra wins). An argument still ``SET_AT_RUNTIME`` is
refused: only ``extra`` may give it. What it executes is the toolbox's script
``<execution.toolbox>/cluster/set_scale`` (or ``set_scale.<ext>``, one of them, executable),
relative to the campaign's folder, with each argument as ``--name=value`` (strings as they
are; numbers and booleans in YAML spelling; lists and mappings as JSON).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from testbed.config.campaign import Campaign
from testbed.config.provenance import Path as DocPath
from testbed.config.provenance import Provenance
from testbed.config.steps import SET_AT_RUNTIME, Parallel, Step
from testbed.core import templates
from testbed.core.errors import CampaignError
from testbed.core.secrets import redact

STEP_VERSION = 1
#: Values of ``run`` while planning: the run does not exist yet.
PLANNING = {"id": "<run-id>", "dir": "<run-dir>", "namespace": "<namespace>"}


@dataclass(frozen=True)
class PlannedStep:
    """One step ready to run: its folder, what it runs, how it may fail."""

    number: int
    phase: str  # cleanup, prepare, test, final_cleanup
    stage: str  # the phase, with test split into test (before) and test_after
    block: int  # steps of one block run at once (a parallel: group)
    name: str
    kind: str  # run, command or capture
    argv: tuple[str, ...] = ()  # with ${env:} references unresolved
    command: str = ""  # the commands: key that gave the arguments
    args: Mapping[str, Any] = field(default_factory=dict)
    capture: tuple[str, ...] = ()
    timeout_s: float | None = None
    on_error: str = "stop"

    @property
    def dirname(self) -> str:
        """``NNN__<phase>__<name>``: ordered as the steps run."""
        return f"{self.number:03d}__{self.phase}__{self.name}"

    def shown(self) -> list[str]:
        """The argv as plans, folders and reports show it (secrets as ***)."""
        return [redact(part) for part in self.argv]

    def to_json(self) -> dict[str, Any]:
        """What the step is, as plans, its folder and the report show it (secrets as ***)."""
        return {
            "schema_version": STEP_VERSION,
            "number": self.number,
            "dir": self.dirname,
            "phase": self.phase,
            "stage": self.stage,
            "block": self.block,
            "name": self.name,
            "kind": self.kind,
            "argv": self.shown(),
            "command": self.command or None,
            "args": json.loads(redact(json.dumps(dict(self.args)))),
            "capture": list(self.capture),
            "timeout_s": self.timeout_s,
            "on_error": self.on_error,
        }


class _Named(list[Any]):
    """A list of mappings that templates can also index by ``name`` (``deployments.stable``)."""

    def __getattr__(self, name: str) -> Any:
        for item in self:
            if isinstance(item, dict) and item.get("name") == name:
                return item
        raise AttributeError(name)


def template_context(campaign: Campaign, run: Mapping[str, str]) -> dict[str, Any]:
    """What templates see: the resolved campaign (without steps, commands, presets) and run."""
    data = campaign.model_dump(mode="json", exclude={"steps", "commands", "presets"})
    data["deployments"] = _Named(data.get("deployments") or [])
    data["run"] = dict(run)
    return data


@dataclass
class _Renderer:
    context: dict[str, Any]
    prov: Provenance
    file: str

    def text(self, template: str, at: DocPath) -> str:
        return str(self._do(template, at, native=False))

    def value(self, value: Any, at: DocPath) -> Any:
        """Strings rendered (one lone ``{{ expr }}`` keeps its type), containers deeply."""
        if isinstance(value, str):
            return self._do(value, at, native=True)
        if isinstance(value, list):
            return [self.value(v, (*at, i)) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.value(v, (*at, k)) for k, v in value.items()}
        return value

    def _do(self, template: str, at: DocPath, *, native: bool) -> Any:
        if "{{" not in template and "{%" not in template:
            return template
        try:
            lone = template.strip()
            if native and lone.startswith("{{") and lone.endswith("}}") and lone.count("{{") == 1:
                return templates.evaluate(lone[2:-2], self.context)
            return templates.render(template, self.context)
        except templates.UndefinedName as exc:
            reason = f"{exc.reason}{_line(exc)}"
            raise self.error(at, f"{template!r}: {reason} — {self.known()}") from None
        except templates.TemplateFailure as exc:
            raise self.error(
                at, f"{template!r} cannot be rendered{_line(exc)}: {exc.reason}"
            ) from None

    def known(self) -> str:
        names = ", ".join(sorted(self.context))
        values = ", ".join(sorted(self.context.get("vars") or {})) or "none yet"
        return f"templates see {names}; vars: {values} (add free-form values under vars:)"

    def error(self, at: DocPath, message: str) -> CampaignError:
        origin = self.prov.nearest(at)
        where = origin.describe() if origin else self.file
        return CampaignError(f"{where}: {_dotted(at)}: {message}")


def plan_steps(
    campaign: Campaign,
    prov: Provenance,
    file: str,
    base_dir: Path,
    run: Mapping[str, str] = PLANNING,
) -> list[PlannedStep]:
    """Every step of the campaign, rendered and numbered in execution order. Raises
    CampaignError (exit 2, file:line) for an unknown template name, a missing command entry,
    an argument left SET_AT_RUNTIME, or a toolbox script that is missing or not executable."""
    renderer = _Renderer(template_context(campaign, run), prov, file)
    planned: list[PlannedStep] = []
    block = 0
    for stage, phase, source, items in _stages(campaign):
        for i, item in items:
            block += 1
            inner = item.parallel if isinstance(item, Parallel) else [item]
            for j, step in enumerate(inner):
                at: DocPath = (
                    ("steps", source, i, "parallel", j)
                    if isinstance(item, Parallel)
                    else ("steps", source, i)
                )
                planned.append(
                    _plan_one(
                        step,
                        at,
                        renderer,
                        campaign,
                        base_dir,
                        PlannedStep(len(planned) + 1, phase, stage, block, step.name, ""),
                    )
                )
    return planned


def _stages(campaign: Campaign) -> list[tuple[str, str, str, list[tuple[int, Step | Parallel]]]]:
    """``(stage, phase, section of steps:, [(index in that section, item)])`` in execution
    order; test items split by ``when`` (their index still points at their line)."""
    steps = campaign.steps
    test = list(enumerate(steps.test))
    final_source = "cleanup" if steps.final_cleanup is None else "final_cleanup"
    final = steps.cleanup if steps.final_cleanup is None else steps.final_cleanup
    return [
        ("cleanup", "cleanup", "cleanup", list(enumerate(steps.cleanup))),
        ("prepare", "prepare", "prepare", list(enumerate(steps.prepare))),
        ("test", "test", "test", [(i, t) for i, t in test if t.when != "after"]),
        ("test_after", "test", "test", [(i, t) for i, t in test if t.when == "after"]),
        ("final_cleanup", "final_cleanup", final_source, list(enumerate(final))),
    ]


def _plan_one(
    step: Step,
    at: DocPath,
    renderer: _Renderer,
    campaign: Campaign,
    base_dir: Path,
    base: PlannedStep,
) -> PlannedStep:
    base = replace(base, name=step.name, timeout_s=step.timeout_s, on_error=step.on_error)
    if step.capture is not None:
        return replace(base, kind="capture", capture=tuple(step.capture))
    if step.command is not None:
        key, args = _command_args(step, at, renderer, campaign)
        script = _toolbox_script(step, at, renderer, campaign, base_dir)
        argv = (str(script), *(f"--{k}={_flag(v)}" for k, v in args.items()))
        return replace(base, kind="command", argv=argv, command=key, args=args)
    if isinstance(step.run, str):  # shell: true (the model refuses a string otherwise)
        line = renderer.text(step.run, (*at, "run"))
        return replace(base, kind="run", argv=("/bin/sh", "-c", line))
    argv = tuple(renderer.text(str(a), (*at, "run", k)) for k, a in enumerate(step.run or []))
    return replace(base, kind="run", argv=argv)


def _command_args(
    step: Step, at: DocPath, renderer: _Renderer, campaign: Campaign
) -> tuple[str, dict[str, Any]]:
    assert step.command is not None
    key = step.command
    if step.prefix:
        key = f"{step.prefix}/{key}"
    if step.suffix:
        key = f"{key}/{step.suffix}"
    if key not in campaign.commands:
        known = ", ".join(sorted(campaign.commands)) or "none"
        raise renderer.error(
            (*at, "command"),
            f"no commands: entry {key!r} gives this command's arguments (known: {known}) —"
            f" add `{key}: {{name: value, …}}` under commands:",
        )
    args = renderer.value(dict(campaign.commands[key]), ("commands", key))
    for name, value in step.extra.items():
        if value == SET_AT_RUNTIME:
            raise renderer.error(
                (*at, "extra", name), f"extra.{name} is {SET_AT_RUNTIME} — give the value itself"
            )
        args[name] = renderer.value(value, (*at, "extra", name))
    for name, value in args.items():
        if value == SET_AT_RUNTIME:
            raise renderer.error(
                (*at, "extra") if step.extra else (*at, "command"),
                f"argument {name!r} of {key} is {SET_AT_RUNTIME}: only this step's extra: may"
                f" give it — add extra: {{{name}: …}}",
            )
    return key, args


def _toolbox_script(
    step: Step, at: DocPath, renderer: _Renderer, campaign: Campaign, base_dir: Path
) -> Path:
    assert step.command is not None
    group, _, name = step.command.partition(".")
    folder = base_dir / campaign.execution.toolbox / group
    found = sorted(p for p in folder.glob(f"{name}*") if name in (p.name, p.stem))
    if len(found) != 1:
        listing = ", ".join(p.name for p in found) if found else "none"
        raise renderer.error(
            (*at, "command"),
            f"command {step.command} runs the toolbox script {folder / name}[.ext], found"
            f" {listing} — add exactly one executable script there (execution.toolbox is"
            f" {campaign.execution.toolbox!r}, relative to the campaign's folder)",
        )
    if not os.access(found[0], os.X_OK):
        raise renderer.error(
            (*at, "command"), f"{found[0]} is not executable — chmod +x {found[0]}"
        )
    return found[0].resolve()


def _line(exc: templates.TemplateFailure) -> str:
    """Where in a template of several lines (a ``run: |`` script) it failed."""
    return f" (line {exc.line} of the template)" if exc.line and exc.line > 1 else ""


def _flag(value: Any) -> str:
    """An argument's value on the command line (YAML spelling for scalars)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _dotted(path: DocPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
