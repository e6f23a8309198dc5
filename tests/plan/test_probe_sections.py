"""The plan holds each resolved probe section as its settings model (one per correctness
suite), validated once; plan.json shows it as the model dumps it, and the treatment ids
that hash it are the ones plans have always had."""

from __future__ import annotations

import hashlib
import json
import textwrap

from testbed.config.ab import AbProbe
from testbed.config.correctness import CorrectnessProbe
from testbed.config.load import LoadProbe
from testbed.config.loader import load_campaign_text
from testbed.config.probe_settings import SETTINGS, section_document
from testbed.core.ids import short_hash
from testbed.plan.expand import expand

CAMPAIGN = textwrap.dedent(
    """\
    name: sections
    deployments:
      - {name: a, server: sim}
      - {name: b, server: sim}
    correctness:
      concurrency: 2
      suites:
        - {deployments: [a], cases: [one.yaml]}
        - {deployments: [b], cases: [two.yaml, three.yaml], reference: b}
    load: {requests: 3}
    ab: {stable: a, canary: b, requests: 5}
    matrix:
      factors:
        load.concurrency: [1, 4]
    """
)


def test_each_section_is_its_probes_model_and_one_per_suite() -> None:
    plan = expand(load_campaign_text(CAMPAIGN, "s.yaml"))
    for treatment in plan.treatments:
        section = plan.probe_configs[treatment.probe_key]
        assert type(section) is SETTINGS[treatment.probe]
    suites = {
        plan.workers[t.workers[0]].deployment: plan.probe_configs[t.probe_key]
        for t in plan.treatments
        if t.probe == "correctness"
    }
    assert isinstance(suites["a"], CorrectnessProbe)
    assert isinstance(suites["b"], CorrectnessProbe)
    assert (suites["a"].cases, suites["a"].reference) == (["one.yaml"], None)
    assert (suites["b"].cases, suites["b"].reference) == (["two.yaml", "three.yaml"], "b")
    assert suites["a"].concurrency == suites["b"].concurrency == 2  # shared settings
    loads = [plan.probe_configs[t.probe_key] for t in plan.treatments if t.probe == "load"]
    assert all(isinstance(s, LoadProbe) for s in loads)
    assert sorted(s.concurrency for s in loads if isinstance(s, LoadProbe)) == [1, 1, 4, 4]
    (ab,) = (plan.probe_configs[t.probe_key] for t in plan.treatments if t.probe == "ab")
    assert isinstance(ab, AbProbe)
    assert (ab.stable, ab.canary, ab.requests) == ("a", "b", 5)


def test_plan_json_shows_the_model_and_the_ids_hash_it_as_before() -> None:
    """A section's key and its treatments' ids hash what they always hashed: the section
    validated and dumped as JSON, every default included (a change would give every run
    new ids)."""
    plan = expand(load_campaign_text(CAMPAIGN, "s.yaml"))
    document = plan.to_json()
    for treatment, shown in zip(plan.treatments, document["treatments"], strict=True):
        assert shown["config"] == section_document(plan.probe_configs[treatment.probe_key])
    (treatment,) = (t for t in plan.treatments if t.probe == "ab")
    written = {"stable": "a", "canary": "b", "requests": 5}
    probe_hash = short_hash(AbProbe.model_validate(written).model_dump(mode="json"))
    assert treatment.probe_key == f"ab:{probe_hash}"
    ids = ",".join(treatment.workers)
    assert treatment.id == hashlib.sha256(f"ab|{probe_hash}|{ids}".encode()).hexdigest()[:10]
    shown = next(t for t in document["treatments"] if t["probe"] == "ab")["config"]
    assert (shown["requests"], shown["criteria"]["min_samples"]) == (5, 30)  # defaults shown
    json.dumps(document)  # JSON data all through, as plan.json is written


def test_a_matrix_over_load_deployments_runs_each_level_on_its_own() -> None:
    """``load.deployments`` varied by a matrix chooses each level's workers (the section
    as resolved, not as written, says where a load runs)."""
    text = CAMPAIGN.replace("load.concurrency: [1, 4]", "load.deployments: [[a], [b]]").replace(
        "load: {requests: 3}", "load: {requests: 3, deployments: [a, b]}"
    )
    plan = expand(load_campaign_text(text, "s.yaml"))
    ran = sorted(
        (plan.workers[t.workers[0]].deployment, t.params["load.deployments"])
        for t in plan.treatments
        if t.probe == "load"
    )
    assert ran == [("a", ["a"]), ("b", ["b"])]
