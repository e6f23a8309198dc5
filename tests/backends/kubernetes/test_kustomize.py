"""A stack's kustomization built as `kubectl kustomize` builds it from the user's folder
(security suite): an overlay's `../base` works, templated or not; a symlink that leaves its
kustomization's folder is refused in kustomize's own words, with the user's paths, and the
file outside is neither applied nor written. The oracle is the real `kubectl kustomize`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from testbed.backends.kubernetes import kustomize
from testbed.backends.kubernetes.stack_render import render_file
from testbed.core.errors import InputError
from tests.backends.kubernetes.conftest import run_cli
from tests.backends.kubernetes.test_stacks_validation import SERVER, campaign

pytestmark = pytest.mark.security
KUBECTL = shutil.which("kubectl") or "kubectl"
OUTSIDE = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-outside}\ndata: {k: secret}\n"
#: A base that is valid YAML before rendering too, so kubectl can build the user's folder.
PLAIN = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {tier: '{{ tier }}'}\n"
    "---\napiVersion: v1\nkind: Service\nmetadata: {name: sim-server}\n"
    "spec: {ports: [{port: 80}]}\n"
)


def _layout(folder: Path, base_text: str = PLAIN) -> Path:
    """base/ (one file) and overlays/prod/ (``../../base`` plus a label); the overlay."""
    base = folder / "base"
    base.mkdir(parents=True)
    (base / "server.yaml").write_text(base_text)
    (base / "kustomization.yaml").write_text("resources: [server.yaml]\n")
    overlay = folder / "overlays" / "prod"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(
        "resources: [../../base]\ncommonLabels: {tier: '{{ tier }}'}\n"
    )
    return overlay


def _kinds(text: str) -> list[str]:
    return sorted(d["kind"] for d in yaml.safe_load_all(text) if d)


def _render(path: Path) -> str:
    names = {"tier": "gold", "values": {}, "deployment": {"name": "sim", "model": "m"}}
    return render_file(path, names)


def _kubectl_words(folder: Path) -> str:
    done = subprocess.run(
        [KUBECTL, "kustomize", str(folder)], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    # "…accumulation err='… security; file 'F' is not in or below 'R'': must build …"
    return done.stderr[done.stderr.index("security;") :].split("': must build")[0]


def test_an_overlay_of_a_base_builds_templated_or_not(tmp_path: Path) -> None:
    overlay = _layout(tmp_path / "stack")
    built = kustomize.build(overlay, _render)
    assert _kinds(built) == ["ConfigMap", "Service"]
    assert "tier: gold" in built  # the overlay's label and the base's own placeholder
    assert "{{" not in built
    as_written = kustomize.build(overlay, None)  # the user's folder, as kubectl builds it
    oracle = subprocess.run([KUBECTL, "kustomize", str(overlay)], capture_output=True,
                            text=True, check=True).stdout  # fmt: skip
    assert as_written == oracle
    assert "{{ tier }}" in as_written


@pytest.mark.parametrize("absolute", [False, True])
def test_a_symlink_out_of_the_kustomization_is_refused_in_kustomizes_words(
    tmp_path: Path, absolute: bool
) -> None:
    overlay = _layout(tmp_path / "stack")
    outside = tmp_path / "outside.yaml"
    outside.write_text(OUTSIDE)
    link = overlay / "extra.yaml"
    link.symlink_to(outside if absolute else Path("../../../outside.yaml"))
    (overlay / "kustomization.yaml").write_text("resources: [../../base, extra.yaml]\n")
    words = _kubectl_words(overlay)  # what kustomize says of the user's own folder
    assert words.startswith(f"security; file '{link}' is not in or below '{overlay}'")
    for render in (_render, None):
        with pytest.raises(InputError) as refused:
            kustomize.build(overlay, render)
        assert words in str(refused.value)
        assert "testbed-kustomize-" not in str(refused.value)  # no scratch path shown
    assert outside.read_text() == OUTSIDE  # rendering never wrote through the link


def test_a_symlink_inside_the_kustomization_is_followed(tmp_path: Path) -> None:
    overlay = _layout(tmp_path / "stack")
    (overlay / "real").mkdir()
    (overlay / "real" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ tier }}'}\n"
    )
    (overlay / "cm.yaml").symlink_to(overlay / "real" / "cm.yaml")  # absolute, yet inside
    (overlay / "kustomization.yaml").write_text("resources: [../../base, cm.yaml]\n")
    built = kustomize.build(overlay, _render)
    assert _kinds(built) == ["ConfigMap", "ConfigMap", "Service"]
    assert "name: gold" in built


def test_validate_accepts_an_overlay_of_a_base(tmp_path: Path) -> None:
    values = {"ttft_ms": 5, "tier": "gold"}
    path = campaign(tmp_path, {}, manifests="stack/overlays/prod", values=values)
    _layout(tmp_path / "stack", SERVER)
    done = run_cli(["validate", str(path)], tmp_path / "no-cluster", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
