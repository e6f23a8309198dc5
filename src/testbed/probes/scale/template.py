"""Workload templates: Jinja2 text rendered with values, parsed as YAML, labelled.

A template is any set of Kubernetes objects (custom resources included) with ``{{ key }}``
placeholders, as kube-burner and Helm write them. It is rendered once per workload with the
values (``name``, ``index``, ``namespace``, ``workers``, ``gpus``, ``pvc``, ``image``,
``run_seconds``, ``workload_type`` and whatever ``--set``/``values`` add), then parsed.
testbed adds two labels to every object and to every pod template inside it
(``testbed.io/scale-run``, ``testbed.io/scale-workload``) so the sampler can find them;
every other field is kept as the user wrote it. Unknown placeholders are errors, not blanks;
templates render in :mod:`testbed.core.templates`' sandbox (values only, no other file).
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubefacts.labels import labelled
from testbed.config.yamlsource import safe_load_all
from testbed.core import templates
from testbed.core.errors import InputError

RUN_LABEL = "testbed.io/scale-run"
WORKLOAD_LABEL = "testbed.io/scale-workload"


@dataclass(frozen=True)
class Template:
    """A loaded template: its source text and where it came from (for messages)."""

    text: str
    origin: str  # a file path or "built-in training"

    @classmethod
    def builtin(cls, workload_type: str) -> Template:
        resource = importlib.resources.files("testbed.probes.scale") / "templates"
        return cls((resource / f"{workload_type}.yaml").read_text(), f"built-in {workload_type}")

    @classmethod
    def from_file(cls, path: Path) -> Template:
        try:
            return cls(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise InputError(
                f"template {path}: cannot read it ({exc.strerror}) — scale.template and"
                " --template take a path relative to the campaign file (or the cwd)"
            ) from exc

    def render(self, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The objects of one workload, labelled. Raises InputError naming the template,
        the line and the fix."""
        text = _render_text(self, values)
        hint = " — quote placeholders that may render special characters"
        loaded = safe_load_all(text, f"{self.origin} (rendered)", hint)
        documents = [d for d in loaded if d is not None]
        if not documents:
            raise InputError(f"template {self.origin}: renders no object")
        objects = []
        for number, doc in enumerate(documents, start=1):
            if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
                raise InputError(
                    f"template {self.origin}: object {number} needs apiVersion and kind"
                )
            if not (doc.get("metadata") or {}).get("name"):
                raise InputError(
                    f"template {self.origin}: object {number} ({doc['kind']}) has no"
                    ' metadata.name — write name: "{{ name }}" (or a name built from it)'
                )
            objects.append(label(doc, str(values["run"]), str(values["name"])))
        return objects


def _render_text(template: Template, values: Mapping[str, Any]) -> str:
    try:
        return templates.render(template.text, values)
    except templates.UndefinedName as exc:
        raise InputError(
            f"{_at(template, exc)}: {exc.reason} — give it a value with"
            " --set KEY=VALUE (or `values:` in the campaign's scale section)"
        ) from None
    except templates.TemplateFailure as exc:
        raise InputError(f"{_at(template, exc)}: {exc.reason}") from None


def _at(template: Template, exc: templates.TemplateFailure) -> str:
    """``origin:line`` when the line is known, else ``template origin``."""
    return f"{template.origin}:{exc.line}" if exc.line else f"template {template.origin}"


def label(obj: dict[str, Any], run: str, workload: str) -> dict[str, Any]:
    """A copy of ``obj`` with the run and workload labels on it and on its pod templates."""
    return labelled(obj, {RUN_LABEL: run, WORKLOAD_LABEL: workload})


def workload_name(prefix: str, index: int) -> str:
    """Deterministic names make a resumed submitter skip what exists (``scale-x1-00042``)."""
    return f"{prefix}-{index:05d}"
