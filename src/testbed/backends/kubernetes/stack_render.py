"""A stack's objects from its manifests (pure: files in, dicts out; no API calls).

``manifests:`` is a YAML file, a folder of YAML files (read in path order), or a folder with
a ``kustomization.yaml``. Every YAML file is a Jinja template rendered with the treatment's
``values`` (each key a top-level name, and all of them as ``values``), plus ``namespace``,
``run_id``, ``worker`` and ``deployment`` (its ``name`` and ``model``); a value may itself
hold placeholders of those (``model: "{{ deployment.model }}"``). Undefined names are
errors (StrictUndefined), placed at ``file:line``; templates render in
:mod:`testbed.core.templates`' sandbox (values only: no Python objects, no other file). A
kustomization is built as ``kubectl kustomize`` builds it, with its load restrictor
(:mod:`.kustomize`). ``kind: List`` documents (some ``helm template`` output) are flattened.

Each object is given the run's labels — on its metadata and on every pod template inside
it — so ``kubectl get … -l testbed.io/run=RUN`` and cleanup find it; a stack's own
``app.kubernetes.io/managed-by`` (Helm's) is kept. Nothing else is changed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubefacts.labels import labelled
from testbed.backends.kubernetes import kustomize
from testbed.config.stacks import StackDeployment
from testbed.core import templates
from testbed.core.errors import InputError

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class StackObject:
    """One rendered object and where it was written (``file:line``)."""

    obj: dict[str, Any]
    origin: str

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def api_version(self) -> str:
        return str(self.obj["apiVersion"])

    def describe(self) -> str:
        return f"{self.kind}/{self.name}"


def source_path(deployment: StackDeployment, base_dir: Path) -> Path:
    """The deployment's ``manifests:`` path; InputError when it does not exist."""
    path = Path(deployment.manifests).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if not path.exists():
        raise InputError(
            f"manifests: no file or folder {deployment.manifests} (relative to {base_dir})"
            " — check the path"
        )
    return path


def render_stack(
    deployment: StackDeployment, base_dir: Path, context: Mapping[str, Any]
) -> list[StackObject]:
    """Every object of the stack for one treatment (InputError at ``file:line``)."""
    root = source_path(deployment, base_dir)
    own: dict[str, Any] = {"deployment": {"name": deployment.name, "model": deployment.model}}
    own.update({k: v for k, v in context.items() if k != "labels"})
    values = render_values(deployment.values, own)
    names = {**values, "values": values, **own, "labels": context.get("labels") or {}}
    templated = deployment.templated
    if kustomize.is_kustomization(root):
        render = functools.partial(render_file, names=names) if templated else None
        objects = parse_objects(kustomize.build(root, render), f"{root} (kustomized)")
    else:
        files = [root] if root.is_file() else _yaml_files(root)
        if not files:
            raise InputError(f"manifests: {root} holds no .yaml or .yml file")
        objects = [
            o
            for f in files
            for o in parse_objects(render_file(f, names) if templated else _read(f), str(f))
        ]
    if not objects:
        raise InputError(f"manifests: {root} renders no object")
    labels = {k: str(v) for k, v in (context.get("labels") or {}).items()}
    return [StackObject(labelled(o.obj, labels), o.origin) for o in objects]


def render_values(values: Mapping[str, Any], names: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with each text that holds a placeholder rendered (``model: "{{
    deployment.model }}"``): the names of ``names`` only, not other values."""

    def one(value: Any, where: str) -> Any:
        if isinstance(value, str) and ("{{" in value or "{%" in value):
            try:
                return templates.render(value, names)
            except templates.TemplateFailure as exc:
                known = ", ".join(sorted(names))
                raise InputError(
                    f"values.{where}: {exc.reason} — a value's placeholders may use {known}"
                ) from None
        if isinstance(value, Mapping):
            return {k: one(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [one(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    return {str(k): one(v, str(k)) for k, v in values.items()}


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _yaml_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in YAML_SUFFIXES)


def render_file(path: Path, names: Mapping[str, Any]) -> str:
    """One file's text rendered with ``names``; InputError at ``file:line`` otherwise."""
    try:
        return templates.render(path.read_text(encoding="utf-8"), names)
    except templates.UndefinedName as exc:
        known = ", ".join(sorted(k for k in names if k != "labels"))
        raise InputError(
            f"{path}{_at(exc)}: {exc.reason} — give it a value in the deployment's values:"
            f" (names it can use: {known})"
        ) from None
    except templates.TemplateFailure as exc:
        raise InputError(f"{path}{_at(exc)}: {exc.reason}") from None


def _at(exc: templates.TemplateFailure) -> str:
    return f":{exc.line}" if exc.line else ""


def parse_objects(text: str, origin: str) -> list[StackObject]:
    """The objects of a YAML stream; each needs apiVersion, kind and metadata.name."""
    loader = yaml.SafeLoader(text)
    found: list[StackObject] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            where = f"{origin}:{node.start_mark.line + 1}"
            doc = loader.construct_document(node)
            if doc is None:
                continue
            found += [StackObject(o, where) for o in _checked(doc, where)]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{origin}:{mark.line + 1}" if mark is not None else origin
        raise InputError(f"{where}: not valid YAML (after rendering): {exc.problem}") from None
    finally:
        loader.dispose()
    return found


def _checked(doc: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
        return [o for item in doc.get("items") or [] for o in _checked(item, where)]
    if not isinstance(doc, dict):
        raise InputError(f"{where}: a manifest document must be a mapping (an object)")
    missing = [f for f in ("apiVersion", "kind") if not doc.get(f)]
    if missing:
        raise InputError(
            f"{where}: the object has no {' or '.join(missing)} — every object needs"
            " apiVersion: and kind: (e.g. apiVersion: apps/v1, kind: Deployment)"
        )
    if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
        raise InputError(f"{where}: {doc['kind']} has no metadata.name — give it a name")
    return [doc]
