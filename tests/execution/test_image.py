"""testbed's image carries what its pods import: the distributions ``Containerfile`` installs
(testbed's dependencies plus the extras it names, and what they require in turn, as pip
resolves them) hold every third-party module imported — at the top or lazily inside a
function — by the code each pod role runs. A new import of a package in no installed extra,
or an extra dropped from the Containerfile, fails here instead of as ImportError in a cluster."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from testbed.cli import main

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "testbed"
#: Pod role → the packages of testbed it runs (the emulator runs on the host, never in a pod).
ROLES = {
    "server pod (testbed serve sim|hf, TGIS gRPC port)": ("servers", "proto", "clients", "core"),
    "probe Job (testbed worker --stream)": ("probes", "clients", "execution", "results", "core"),
    "exported task (testbed worker: backend, upload, report)": (
        "cli", "backends", "execution", "results", "report", "plan", "config", "core",
    ),
}  # fmt: skip
#: Modules of those packages that run on the host only: ``testbed cluster emulate`` (kubemu).
HOST_ONLY = {"cli/cluster.py"}


def containerfile_extras() -> set[str]:
    text = (ROOT / "Containerfile").read_text()
    (extras,) = re.findall(r"pip install '\.\[([a-z0-9,]+)\]'", text)
    return set(extras.split(","))


def installed_closure(extras: set[str]) -> set[str]:
    """Normalised names of the distributions pip installs for ``testbed[extras]``."""
    seen: set[str] = set()
    todo: list[tuple[str, set[str]]] = [("testbed", extras)]
    while todo:
        name, wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen and not wanted:
            continue
        seen.add(key)
        for line in md.requires(name) or []:
            req = Requirement(line)
            if req.marker and not any(
                req.marker.evaluate({"extra": extra}) for extra in (wanted or {""})
            ):
                continue
            todo.append((req.name, set(req.extras)))
    return seen


def third_party_imports(packages: tuple[str, ...]) -> dict[str, str]:
    """Top-level module → first file importing it, over ``packages`` of testbed."""
    found: dict[str, str] = {}
    for package in packages:
        for path in sorted((SRC / package).rglob("*.py")):
            if str(path.relative_to(SRC)) in HOST_ONLY:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top != "testbed":
                        found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_the_containerfile_installs_every_extra_the_pods_import() -> None:
    extras = containerfile_extras()
    assert {"tgis", "kubernetes", "s3"} <= extras
    installed = installed_closure(extras)
    distributions = md.packages_distributions()
    missing = []
    for role, packages in ROLES.items():
        for module, where in third_party_imports(packages).items():
            names = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions.get(module, [])}
            if not names & installed:
                missing.append(f"{role}: {module} ({where}) from {sorted(names) or '?'}")
    assert missing == []


def test_dropping_an_extra_is_noticed() -> None:
    """The check can fail: without ``tgis`` the gRPC modules of servers (grpcio) and of the
    probes' client (hpack, protobuf) have no distribution in the image."""
    installed = installed_closure(containerfile_extras() - {"tgis"})
    assert "hpack" not in installed  # (grpcio also comes with history's BigQuery client)
    assert "hpack" in third_party_imports(ROLES["probe Job (testbed worker --stream)"])


@pytest.mark.parametrize(
    ("backend", "deployment", "field"),
    [
        ({"images": {"vllm": "testbed:latest"}}, {}, "backend.images.vllm"),
        ({"image": "quay.io/me/testbed:1"}, {"image": "quay.io/me/testbed:2"},
         "deployments[0].image"),
        ({"server_image": "testbed"}, {}, "backend.server_image"),
    ],
)  # fmt: skip
def test_a_server_under_test_in_testbeds_own_image_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: dict[str, str],
    deployment: dict[str, str], field: str,
) -> None:  # fmt: skip
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump({
        "name": "own-image",
        "backend": {"kind": "kubernetes", **backend},
        "deployments": [{"name": "v", "server": "vllm", "model": "s3://b/m", **deployment}],
        "load": {"profile": "concurrency", "concurrency": 1, "requests": 2,
                 "dataset": {"kind": "synthetic", "input_tokens": 8, "output_tokens": 4}},
    }))  # fmt: skip
    for args in (
        ["plan", str(campaign), "--manifests", str(tmp_path / "manifests")],
        ["export", "tekton", str(campaign), "--upload", "s3://b/p", "--out", str(tmp_path / "x")],
    ):
        assert main(args) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{field}: v is a vllm server" in err
        assert "is testbed's own, which has no vllm in it" in err
    assert not (tmp_path / "manifests").exists()
