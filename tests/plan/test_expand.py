"""Plan expansion: pure, deterministic, unique ids, shared workers, model fit, rules."""

from __future__ import annotations

import textwrap

import pytest

from testbed.config.loader import load_campaign_text
from testbed.core.errors import CampaignError
from testbed.plan.expand import expand

CAMPAIGN = textwrap.dedent(
    """\
    name: sweep
    deployments:
      - name: ref
        server: hf
        model: bundled:smollm2-135m
      - name: sim
        server: sim
    matrix:
      factors:
        deployments.ref.params.dtype: [float32, bfloat16]
        load.concurrency: [1, 4, 16]
        load.rate: [null, 5, 10]
      zip: [[load.concurrency, load.rate]]
      exclude:
        - {deployments.ref.params.dtype: bfloat16, load.concurrency: 16}
    load:
      concurrency: 1
    correctness:
      cases: [c.yaml]
    """
)


def plan_of(text: str = CAMPAIGN, **kwargs: object):  # type: ignore[no-untyped-def]
    return expand(load_campaign_text(text, "p.yaml", **kwargs))


def test_same_campaign_same_plan() -> None:
    assert plan_of().to_json() == plan_of().to_json()


def test_zip_exclude_and_worker_sharing() -> None:
    plan = plan_of()
    loads = [t for t in plan.treatments if t.probe == "load"]
    # ref float32 × 3 zipped levels, ref bfloat16 × 2 (one excluded), sim × 3 (deduplicated
    # across the dtype factor, which does not touch it).
    assert len(loads) == 3 + 2 + 3
    pairs = {(t.params["load.concurrency"], t.params["load.rate"]) for t in loads}
    assert pairs == {(1, None), (4, 5), (16, 10)}
    # Correctness does not depend on load factors: once per worker.
    correctness = [t for t in plan.treatments if t.probe == "correctness"]
    assert len(correctness) == len(plan.workers) == 3
    # Treatments that share a deployment share a worker.
    assert {t.workers for t in loads} == {(w,) for w in plan.workers}


def test_ids_and_dirs_unique() -> None:
    plan = plan_of()
    assert len({t.id for t in plan.treatments}) == len(plan.treatments)
    assert len({t.dirname for t in plan.treatments}) == len(plan.treatments)
    assert [t.index for t in plan.treatments] == list(range(1, len(plan.treatments) + 1))


def test_any_field_change_changes_the_id() -> None:
    base = {t.slug: t.id for t in plan_of().treatments}
    changed = {t.slug: t.id for t in plan_of(sets=["load.timeout_s=33"]).treatments}
    load_slugs = [s for s in base if "-load-" in s]
    assert load_slugs
    assert all(base[s] != changed[s] for s in load_slugs)
    assert all(base[s] == changed[s] for s in base if "-correctness" in s)


def test_model_fit_check_skips_with_numbers() -> None:
    plan = plan_of(sets=["deployments.ref.resources.memory_gb=0.1"])
    skipped = [t for t in plan.treatments if t.status == "skipped"]
    assert skipped
    assert all("needs" in t.reason and "GiB" in t.reason for t in skipped)
    assert all(t.workers[0].startswith("ref-") for t in skipped)


def test_adapter_rule_names_the_combination() -> None:
    text = CAMPAIGN.replace("[float32, bfloat16]", "[float32, float16]").replace(
        "bfloat16, load", "float16, load"
    )
    with pytest.raises(CampaignError) as err:
        plan_of(text)
    assert "deployments.ref.params.dtype=float16" in str(err.value)
    assert "set params.dtype: float32" in str(err.value)


def test_unknown_unroll_factor() -> None:
    with pytest.raises(CampaignError, match=r"unroll names 'load\.x'"):
        plan_of(sets=["execution.unroll=[load.x]"])


def test_factor_on_absent_section() -> None:
    text = CAMPAIGN.replace("    load.rate: [null, 5, 10]\n", "    ab.requests: [1]\n")
    text = text.replace("  zip: [[load.concurrency, load.rate]]\n", "")
    with pytest.raises(CampaignError, match="varies `ab:`"):
        plan_of(text)


def test_plan_json_shape_and_secret_masking() -> None:
    text = textwrap.dedent(
        """\
        name: ext
        backend: external
        deployments:
          - name: prod
            server: external
            url: http://127.0.0.1:9
            api_key: ${env:SECRET_TOKEN}
        load: {}
        """
    )
    document = plan_of(text).to_json()
    treatment = document["treatments"][0]
    assert set(treatment) >= {"id", "worker", "status", "reason", "params"}
    assert treatment["status"] == "planned"
    assert document["workers"][0]["config"]["api_key"] == "***"


@pytest.mark.parametrize(("memory", "skipped"), [(0.1, True), (40, False)])
def test_gpu_memory_gb_is_the_memory_of_a_gpu_worker(memory: float, skipped: bool) -> None:
    """With GPUs the planner weighs the model against gpu × gpu_memory_gb, not memory_gb."""
    sets = [
        "deployments.ref.server=vllm",
        "deployments.ref.resources.gpu=1",
        f"deployments.ref.resources.gpu_memory_gb={memory}",
        "deployments.ref.resources.memory_gb=0.01",  # would skip everything if it were used
        "deployments.ref.params.dtype=float16",
    ]
    plan = plan_of(sets=sets)
    ref = [t for t in plan.treatments if t.workers[0].startswith("ref-")]
    assert ref
    assert all((t.status == "skipped") is skipped for t in ref), [t.reason for t in ref]


def test_include_adds_combinations() -> None:
    text = CAMPAIGN.replace(
        "  zip: [[load.concurrency, load.rate]]\n",
        "  zip: [[load.concurrency, load.rate]]\n"
        "  include:\n    - {load.concurrency: 64, load.rate: 99}\n",
    )
    assert text != CAMPAIGN
    with_include = plan_of(text)
    without = plan_of()
    extra = {t.id for t in with_include.treatments} - {t.id for t in without.treatments}
    added = [t for t in with_include.treatments if t.id in extra]
    assert added
    assert {(t.params["load.concurrency"], t.params["load.rate"]) for t in added} == {(64, 99)}


@pytest.mark.parametrize("section", ["load", "correctness"])
def test_probe_deployments_restrict_the_treatments(section: str) -> None:
    text = CAMPAIGN.replace(f"{section}:\n", f"{section}:\n  deployments: [sim]\n", 1)
    assert text != CAMPAIGN
    restricted = [t for t in plan_of(text).treatments if t.probe == section]
    everyone = [t for t in plan_of().treatments if t.probe == section]
    assert {t.workers[0].split("-")[0] for t in everyone} == {"ref", "sim"}
    assert {t.workers[0].split("-")[0] for t in restricted} == {"sim"}
