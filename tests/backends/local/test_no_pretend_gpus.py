"""No pretend GPUs, through the command line: on a machine without GPUs (nvidia-smi and
device files absent, by an injected probe — whatever machine runs the tests), a campaign
naming devices is refused before its run directory; a run whose every treatment needs a GPU
tested nothing and exits 5; ``resources.gpu`` on a server that never uses one is said."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.backends.local import gpus
from testbed.cli import main
from testbed.core.errors import EXIT_INPUT, EXIT_NOTHING_TESTED, EXIT_OK

EXAMPLES = Path(__file__).parents[3] / "examples"


@pytest.fixture
def no_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine, as the backend sees it: no nvidia-smi, an empty /dev."""
    dev = tmp_path / "dev"
    dev.mkdir()
    empty = functools.partial(gpus.probe_machine, which=lambda _name: None, dev=dev)
    monkeypatch.setattr(gpus, "probe_machine", empty)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return dev


def campaign(tmp_path: Path, gpu: int, **backend: Any) -> Path:
    deployment = {"name": "one", "server": "sim", "params": {"seed": 0, "max_model_len": 256}}
    data = {
        "name": "gpus",
        "backend": {"kind": "local", **backend},
        "deployments": [{**deployment, "resources": {"gpu": gpu}}],
        "correctness": {"cases": [str(EXAMPLES / "cases" / "sim.yaml")]},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("command", ["plan", "run"])  # validate checks the file, not the machine
def test_devices_the_machine_lacks_are_refused(
    tmp_path: Path, no_gpus: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = campaign(tmp_path, 1, gpus=[0, 1])
    out = ["--out", str(tmp_path / "never")] if command == "run" else []
    assert main([command, str(path), *out]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "backend.gpus names GPU(s) [0, 1], which this machine does not offer" in err
    assert f"looked for nvidia-smi on PATH and device files {no_gpus}/nvidia<N>" in err
    assert not (tmp_path / "never").exists()


def test_a_run_whose_every_treatment_needs_a_missing_gpu_exits_5(
    tmp_path: Path, no_gpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = campaign(tmp_path, 1)
    out = ["--out", str(tmp_path / "run"), "--index", f"sqlite:///{tmp_path}/i.db"]
    assert main(["run", str(path), *out]) == EXIT_NOTHING_TESTED
    printed = capsys.readouterr().out
    assert "nothing was tested: all 1 treatment(s) were skipped" in printed
    assert "needs 1 GPU(s)" in printed


def test_gpus_on_a_server_that_never_uses_one_are_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gpus, "probe_machine", gpus.Listed((0, 1)))
    path = campaign(tmp_path, 1)
    assert main(["validate", str(path)]) == EXIT_OK
    said = capsys.readouterr().out
    assert "note: deployment 'one' (sim) has resources.gpu 1, but sim never uses a GPU" in said
    assert "drop resources.gpu" in said
    assert main(["plan", str(path)]) == EXIT_OK
    assert "sim never uses a GPU" in capsys.readouterr().out
    assert main(["validate", str(campaign(tmp_path, 0))]) == EXIT_OK
    assert "note:" not in capsys.readouterr().out
