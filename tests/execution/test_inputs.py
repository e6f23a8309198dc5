"""Files a campaign names are checked by validate (and run) before anything starts: a
missing one is exit 2 at the line that names it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from testbed.cli import main

HEAD = textwrap.dedent(
    """\
    name: files
    deployments:
      - {name: a, server: sim}
      - {name: b, server: sim}
    """
)


@pytest.mark.parametrize(
    ("section", "place", "field"),
    [
        ("correctness:\n  cases: [gone.yaml]\n", "6:11", "correctness.cases[0]"),
        ("ab:\n  stable: a\n  canary: b\n  prompts: gone.jsonl\n", "8:12", "ab.prompts"),
        (
            "load:\n  requests: 2\n  dataset: {kind: file, path: gone.jsonl}\n",
            "7:31",
            "load.dataset.path",
        ),
        (  # a sessions' conversations and a trace are the dataset's file too
            "load:\n  requests: 2\n  dataset: {kind: sessions, path: gone.jsonl}\n",
            "7:35",
            "load.dataset.path",
        ),
        (
            "load:\n  profile: trace\n  dataset: {kind: trace, path: gone.jsonl}\n",
            "7:32",
            "load.dataset.path",
        ),
    ],
)
def test_a_missing_file_is_refused_at_its_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    section: str,
    place: str,
    field: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # every path starts at the campaign's folder, not here
    (tmp_path / "campaign").mkdir()
    file = tmp_path / "campaign" / "c.yaml"
    file.write_text(HEAD + section)
    assert main(["validate", str(file)]) == 2
    assert main(["run", str(file), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{file}:{place}: {field}: no file gone." in err
    assert not (tmp_path / "run").exists()
    gone = "gone.yaml" if "cases" in field else "gone.jsonl"
    (tmp_path / gone).write_text("")
    main(["validate", str(file)])
    assert f"no file {gone}" in capsys.readouterr().err  # beside the cwd does not count
    (tmp_path / "campaign" / gone).write_text("")
    main(["validate", str(file)])
    assert "no file gone." not in capsys.readouterr().err  # once it exists, that check passes


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("bundled:nope", "unknown bundled model 'nope'"),
        ("org/model", "'org/model' is a hub id, which the local backend cannot fetch"),
        ("/no/such/folder", "no model folder /no/such/folder"),
    ],
)
def test_a_model_the_local_backend_cannot_load_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, message: str
) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(
        f"name: m\ndeployments:\n  - name: a\n    server: hf\n    model: {model}\n"
        "load: {requests: 1}\n"
    )
    assert main(["validate", str(file)]) == 2
    assert main(["run", str(file), "--out", str(tmp_path / "run")]) == 2
    assert f"{file}:5:12: deployments[0].model: {message}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--context", "nope"], "has no context 'nope' (its contexts: here)"),
        (["--set", "backend.kubeconfig=gone.yaml"], "no kubeconfig at gone.yaml"),
        (
            ["--set", "backend.server=https://k:6443", "--set", "backend.token=${env:NO_TOKEN}"],
            "NO_TOKEN",
        ),
    ],
)
def test_a_cluster_run_that_cannot_connect_is_refused_before_its_run_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    _kubeconfig(tmp_path, monkeypatch)
    monkeypatch.delenv("NO_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    file = tmp_path / "c.yaml"
    file.write_text(HEAD + "backend: {kind: kubernetes}\nload: {requests: 1}\n")
    code = main(["run", str(file), "--set", "backend.kind=kubernetes", *flags,
                 "--out", str(tmp_path / "run")])  # fmt: skip
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_unset_keys_of_a_cluster_runs_secrets_are_refused_before_its_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Weights in S3 need the keys the run's Secret is made of: unset, nothing is written."""
    _kubeconfig(tmp_path, monkeypatch)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    file = tmp_path / "c.yaml"
    file.write_text(
        "name: s3\nbackend: {kind: kubernetes}\ndeployments:\n"
        "  - {name: a, server: hf, model: 's3://models/m', s3_endpoint_url: 'http://s3:9000'}\n"
        "load: {requests: 1}\n"
    )
    assert main(["run", str(file), "--out", str(tmp_path / "run")]) == 2
    assert "environment variable AWS_ACCESS_KEY_ID is not set" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def _kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubeconfig with one context, ``here``, as $KUBECONFIG (nothing listens there)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: here, context: {cluster: c, user: u}}]\n"
        "current-context: here\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
