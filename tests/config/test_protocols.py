"""A probe over a protocol its server does not serve is refused at validation — exit 2, at
the probe's field, with the fix — not skipped case by case at run time (openai cases against
a gRPC-only TGIS used to end ``0 (11 skipped)`` and exit 0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.cli import main
from testbed.config.deployments import deployment_model
from testbed.config.loader import load_campaign
from testbed.config.protocols import served
from testbed.config.server_kinds import KINDS, server_kind
from testbed.core.errors import CampaignError
from testbed.servers.adapters import adapter_for

TGIS = {
    "name": "t5",
    "server": "tgis",
    "model": "google/flan-t5-small",
    "params": {"deployment_framework": "tgis_native"},
}
CLUSTER = {"kind": "kubernetes", "context": "x"}


def write(tmp_path: Path, deployments: list[dict[str, Any]], **sections: Any) -> Path:
    case = "- name: a\n  request: {prompt: hi, max_new_tokens: 2}\n  skip_check: true\n"
    (tmp_path / "cases.yaml").write_text(case)
    data = {"name": "p", "backend": sections.pop("backend", CLUSTER), "deployments": deployments}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**data, **sections}, sort_keys=False))
    return path


def test_openai_cases_against_a_grpc_only_tgis_are_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, [TGIS], correctness={"cases": ["cases.yaml"]})  # default: openai
    for command in ("validate", "plan"):
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{path}:" in err
        assert (
            "correctness.protocol: openai needs openai, but deployment 't5' (tgis) serves only"
            " tgis — set correctness.protocol: tgis, or leave it out of correctness.deployments"
        ) in err
    fixed = write(tmp_path, [TGIS], correctness={"cases": ["cases.yaml"], "protocol": "tgis"})
    assert main(["validate", str(fixed)]) == 0


@pytest.mark.parametrize(
    ("deployment", "sections", "message"),
    [
        (  # both = openai and tgi; vLLM serves openai only
            {"name": "v", "server": "vllm", "model": "m"},
            {"correctness": {"cases": ["cases.yaml"], "protocol": "both"}},
            "correctness.protocol: both needs tgi, but deployment 'v' (vllm) serves only openai"
            " — set correctness.protocol: openai",
        ),
        (
            {"name": "v", "server": "vllm", "model": "m"},
            {"load": {"api": "tgi", "requests": 2}},
            "load.api: tgi needs tgi, but deployment 'v' (vllm) serves only openai — set"
            " load.api: completions",
        ),
        (  # an own server chooses its protocols: the fix says so first
            {"name": "s", "server": "sim", "params": {"protocols": ["openai"]}},
            {"load": {"api": "tgi", "requests": 2}},
            "load.api: tgi needs tgi, but deployment 's' (sim) serves only openai — add tgi to"
            " its params.protocols, or set load.api: completions",
        ),
        (
            {"name": "x", "server": "external", "url": "http://h:1", "protocol": "tgi"},
            {"correctness": {"cases": ["cases.yaml"]}},
            "correctness.protocol: openai needs openai, but deployment 'x' (external) serves"
            " only tgi — set correctness.protocol: tgi",
        ),
        (
            {"name": "x", "server": "external", "url": "http://h:1"},
            {"load": {"api": "tgis", "requests": 2}},
            "load.api: tgis needs tgis, but deployment 'x' (external) serves only openai — set"
            " protocol: tgis and grpc: HOST:PORT",
        ),
    ],
)
def test_every_probe_protocol_is_checked_against_what_its_server_serves(
    tmp_path: Path, deployment: dict[str, Any], sections: dict[str, Any], message: str
) -> None:
    with pytest.raises(CampaignError) as refused:
        load_campaign(str(write(tmp_path, [deployment], **sections)))
    assert message in str(refused.value)


def test_ab_checks_both_sides(tmp_path: Path) -> None:
    sims = [
        {"name": "a", "server": "sim"},
        {"name": "b", "server": "sim", "params": {"protocols": ["openai"]}},
    ]
    ab = {"stable": "a", "canary": "b", "api": "tgi", "requests": 4}
    with pytest.raises(CampaignError, match=r"ab\.api: tgi needs tgi, but deployment 'b'"):
        load_campaign(str(write(tmp_path, sims, ab=ab)))


def test_a_matrix_that_makes_an_unreachable_treatment_is_refused_at_planning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        [{"name": "s", "server": "sim"}],
        backend="local",
        correctness={"cases": ["cases.yaml"]},
        matrix={"factors": {"correctness.protocol": ["openai", "tgis"]}},
    )
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "with correctness.protocol=tgis: correctness.protocol: tgis needs tgis" in err
    assert "exclude this combination in matrix.exclude" in err


@pytest.mark.parametrize("name", sorted(k for k, kind in KINDS.items() if kind.pod))
def test_validation_and_the_adapters_agree_on_what_a_kind_serves(name: str) -> None:
    """One fact, both sides: what validation says a deployment serves is what the adapter
    will list on its endpoint (the run's skips would otherwise disagree with validation)."""
    chosen: list[tuple[str, ...]] = [()]
    if server_kind(name).tgis_by == "params":
        chosen += [("openai",), ("tgi", "tgis")]
    for protocols in chosen:
        params: dict[str, Any] = {"protocols": list(protocols)} if protocols else {}
        if name == "tgis":
            params["deployment_framework"] = "tgis_native"
        deployment = deployment_model({"name": "d", "server": name, "model": "m", "params": params})
        assert served(deployment) == adapter_for(name).served_protocols(deployment.params)
