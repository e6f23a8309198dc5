"""Loading campaigns: presets, --set, extends, provenance and secrets."""

from __future__ import annotations

import textwrap

import pytest

from testbed.config.loader import load_campaign, load_campaign_text
from testbed.core.errors import CampaignError

BASE = textwrap.dedent(
    """\
    name: demo
    deployments:
      - name: ref
        server: hf
        model: bundled:smollm2-135m
      - name: ref-big
        extends: ref
        params:
          max_batch_size: 16
    load:
      concurrency: 2
    correctness:
      cases: [cases.yaml]
    presets:
      fast:
        load.concurrency: 3
      faster:
        extends: [fast]
        load.concurrency: 9
        deployments.params.dtype: bfloat16
      loop-a:
        extends: [loop-b]
      loop-b:
        extends: [loop-a]
    """
)


def load(**kwargs: object):  # type: ignore[no-untyped-def]
    return load_campaign_text(BASE, "demo.yaml", **kwargs)


def test_defaults_and_file_values() -> None:
    loaded = load()
    assert loaded.campaign.load is not None
    assert loaded.campaign.load.concurrency == 2
    assert loaded.campaign.backend.kind == "local"
    assert loaded.explain("load.concurrency") == (2, "demo.yaml:11:16")
    value, source = loaded.explain("execution.retries")
    assert (value, source) == (1, "default")


def test_extends_inherits_and_overrides() -> None:
    campaign = load().campaign
    child = campaign.deployments[1]
    assert child.model == "bundled:smollm2-135m"
    assert child.params.max_batch_size == 16
    assert campaign.deployments[0].params.max_batch_size == 8


def test_presets_apply_extends_first_and_last_write_wins() -> None:
    loaded = load(presets=["faster"])
    assert loaded.campaign.load is not None
    assert loaded.campaign.load.concurrency == 9
    assert loaded.presets == ["fast", "faster"]
    assert all(d.params.dtype == "bfloat16" for d in loaded.campaign.deployments)
    value, source = loaded.explain("load.concurrency")
    assert value == 9
    assert source.startswith("preset faster (demo.yaml:")


def test_set_wins_over_presets() -> None:
    loaded = load(presets=["faster"], sets=["load.concurrency=12"])
    assert loaded.campaign.load is not None
    assert loaded.campaign.load.concurrency == 12
    assert loaded.explain("load.concurrency")[1] == "--set load.concurrency=12"


def test_set_addresses_one_deployment_by_name() -> None:
    campaign = load(sets=["deployments.ref-big.params.threads=2"]).campaign
    assert [d.params.threads for d in campaign.deployments] == [1, 2]  # type: ignore[union-attr]


def test_preset_on_parent_reaches_child_through_extends() -> None:
    campaign = load(sets=["deployments.ref.params.threads=2"]).campaign
    assert [d.params.threads for d in campaign.deployments] == [2, 2]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"presets": ["fastr"]}, "unknown preset 'fastr' — did you mean 'fast"),
        ({"presets": ["loop-a"]}, "preset cycle loop-a → loop-b → loop-a"),
        ({"sets": ["load.concurency=3"]}, "did you mean 'concurrency'?"),
        ({"sets": ["load.concurrency=lots"]}, "--set load.concurrency=lots: load.concurrency"),
        ({"sets": ["load.concurrency"]}, "expected KEY=VALUE"),
        ({"sets": ["=3"]}, "expected KEY=VALUE"),
        ({"sets": ["load..x=3"]}, "is not a dotted key"),
    ],
)
def test_override_errors(kwargs: dict[str, list[str]], expected: str) -> None:
    with pytest.raises(CampaignError) as err:
        load(**kwargs)
    assert expected in str(err.value)


def test_missing_file_is_an_input_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CampaignError, match="no such file"):
        load_campaign(tmp_path / "absent.yaml")


def test_secret_reference_is_kept_not_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_X", "s3cr3t")
    text = textwrap.dedent(
        """\
        name: ext
        backend: external
        deployments:
          - name: prod
            server: external
            url: http://127.0.0.1:9
            api_key: ${env:TOKEN_X}
        load: {}
        """
    )
    loaded = load_campaign_text(text, "ext.yaml")
    assert loaded.campaign.deployments[0].api_key == "${env:TOKEN_X}"  # type: ignore[union-attr]
    value, _ = loaded.explain("deployments.prod.api_key")
    assert "s3cr3t" not in str(value)
