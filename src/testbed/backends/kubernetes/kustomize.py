"""A stack's kustomization built as ``kubectl kustomize`` builds it from the user's folder.

kustomize's load restrictor (``LoadRestrictionsRootOnly``, its default) is the rule: a file
must be in or below the root of the kustomization that names it — a symlink is followed
first, so one that points outside is refused (``security; file '…' is not in or below
'…'``) — while ``resources:`` (and ``bases:``, ``components:``) may name another
kustomization's directory anywhere, such as ``../base``, which is then a root of its own.

Without templating, kustomize runs on the user's folder itself. With templating the files
must be rendered first, never in the user's folder: every kustomization directory the build
reaches is mirrored into a scratch folder at the same place relative to the others (so
``../base`` still finds the base), its YAML files rendered, and each symlink kept a symlink —
one to a file of its own root points at the mirror's copy, one that leaves its root points
at the very file outside, where kustomize's restrictor refuses it. kustomize's messages are
given back with the user's paths in place of the scratch folder's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from testbed.core.errors import InputError

KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
YAML_SUFFIXES = (".yaml", ".yml")
KUSTOMIZE_TIMEOUT_S = 60.0
#: The fields whose entries may name another kustomization directory.
_DIRECTORY_FIELDS = ("resources", "bases", "components")

#: Renders one YAML file of a kustomization (the stack's Jinja rendering).
Render = Callable[[Path], str]


def is_kustomization(folder: Path) -> bool:
    return folder.is_dir() and any((folder / name).is_file() for name in KUSTOMIZATIONS)


def build(root: Path, render: Render | None) -> str:
    """``kubectl kustomize`` of ``root``'s output (its files rendered by ``render`` first,
    when given); InputError with kustomize's words otherwise."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise InputError(
            f"manifests: {root} is a kustomization, which testbed builds with `kubectl"
            " kustomize` — install kubectl, or give the rendered YAML instead"
        )
    if render is None:
        return _run(kubectl, root, root, {})
    real = Path(os.path.realpath(root))
    roots = _roots(real)
    top = Path(os.path.commonpath([str(r) for r in roots]))
    with tempfile.TemporaryDirectory(prefix="testbed-kustomize-") as scratch:
        mirror = Path(scratch) / "m"
        for one in roots:
            if not any(other != one and one.is_relative_to(other) for other in roots):
                _mirror(one, mirror / one.relative_to(top), render)
        return _run(kubectl, root, mirror / real.relative_to(top), {str(mirror): str(top)})


def _run(kubectl: str, root: Path, target: Path, paths: dict[str, str]) -> str:
    try:
        done = subprocess.run(
            [kubectl, "kustomize", str(target)],
            capture_output=True,
            text=True,
            timeout=KUSTOMIZE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise InputError(f"manifests: `kubectl kustomize {root}` took too long") from None
    if done.returncode != 0:
        words = done.stderr.strip()
        for scratch, user in paths.items():
            words = words.replace(scratch, user)
        raise InputError(f"manifests: `kubectl kustomize {root}` failed: {words}")
    return done.stdout


def _roots(root: Path) -> list[Path]:
    """``root`` and every kustomization directory its build reaches (real paths)."""
    found = [root]
    for folder in found:  # grows while it is walked: breadth first, each once
        for entry in _directory_entries(folder):
            if "://" in entry or entry.startswith(("git@", "github.com/")):
                continue  # a remote base: kustomize fetches it itself
            target = Path(os.path.realpath(folder / entry))
            if is_kustomization(target) and target not in found:
                found.append(target)
    return found


def _directory_entries(folder: Path) -> list[str]:
    path = next(folder / name for name in KUSTOMIZATIONS if (folder / name).is_file())
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []  # kustomize reports it, in its words, when it builds
    if not isinstance(document, dict):
        return []
    entries = [document.get(name) or [] for name in _DIRECTORY_FIELDS]
    return [e for field in entries if isinstance(field, list) for e in field if isinstance(e, str)]


def _mirror(root: Path, copy: Path, render: Render) -> None:
    """``root`` copied to ``copy``: symlinks kept as links (re-aimed), YAML rendered."""
    shutil.copytree(root, copy, symlinks=True)
    for folder, dirs, files in os.walk(copy):
        for name in [*dirs, *files]:
            link = Path(folder) / name
            if link.is_symlink():
                _reaim(link, root / link.relative_to(copy), root, copy)
    for folder, _, files in os.walk(root):  # not into symlinked folders: those are links
        for name in files:
            source = Path(folder) / name
            if source.suffix in YAML_SUFFIXES and not source.is_symlink():
                (copy / source.relative_to(root)).write_text(render(source), encoding="utf-8")


def _reaim(link: Path, original: Path, root: Path, copy: Path) -> None:
    """A link inside its root points at the mirror's copy; one that leaves it points at the
    real file outside, for kustomize's restrictor to refuse as it would in the user's folder."""
    real = Path(os.path.realpath(original))
    link.unlink()
    if real.is_relative_to(root):
        link.symlink_to(os.path.relpath(copy / real.relative_to(root), link.parent))
    else:
        link.symlink_to(real)
