"""testbed compare: slower → exit 1 with evidence; faster → exit 0, listed as improvements;
same distribution → no regression; setups must match; pairing; noise bands from history;
single-point history; thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from testbed.cli import main
from testbed.core.errors import InputError
from testbed.report.compare import CompareOptions, compare_runs
from testbed.report.compare_sides import pair
from testbed.report.metric_change import Evidence, judge
from testbed.report.run_summary import PublishOptions, publish
from testbed.report.thresholds import parse_threshold, parse_thresholds, threshold_for
from testbed.results.run_summary import TreatmentRow
from tests.report.fake_runs import MACHINE, make_run


def test_slower_candidate_fails_with_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run(tmp_path, "base", seed=1)
    make_run(tmp_path, "slow", seed=2, ttft_ms=26.0)
    out = tmp_path / "cmp.json"
    code = main(
        [
            "compare",
            str(tmp_path / "base"),
            str(tmp_path / "slow"),
            "--no-index",
            "--json",
            str(out),
        ]
    )
    assert code == 1
    text = capsys.readouterr().out
    assert "REGRESSION" in text
    assert "ttft_ms.p50" in text
    doc = json.loads(out.read_text())
    assert doc["failed"] is True
    p50 = next(
        m
        for m in doc["metrics"]
        if m["metric"] == "ttft_ms.p50" and m["treatment"].startswith("001")
    )
    assert p50["outcome"] == "regression"
    assert p50["direction"] == "lower"
    assert p50["change"] == pytest.approx(0.3, abs=0.06)
    assert p50["interval"][0] > 0.05  # the whole interval beyond the 5 % threshold
    assert "bootstrap" in p50["method"]
    assert "n=300/300" in p50["method"]


def test_faster_candidate_is_an_improvement_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run(tmp_path, "base", seed=1)
    make_run(tmp_path, "fast", seed=2, ttft_ms=14.0)
    code = main(["compare", str(tmp_path / "base"), str(tmp_path / "fast"), "--no-index"])
    assert code == 0
    text = capsys.readouterr().out
    assert "improvement" in text
    assert "no regression" in text
    comparison = compare_runs(tmp_path / "base", tmp_path / "fast", CompareOptions(use_index=False))
    assert {r.metric for r in comparison.improvements} >= {"ttft_ms.p50", "ttft_ms.mean"}
    assert not comparison.regressions


@pytest.mark.parametrize("seed", [1, 7, 23])
def test_same_distribution_is_no_regression(tmp_path: Path, seed: int) -> None:
    make_run(tmp_path, "a", seed=seed)
    make_run(tmp_path, "b", seed=seed + 1000)
    comparison = compare_runs(tmp_path / "a", tmp_path / "b", CompareOptions(use_index=False))
    assert not comparison.failed, [(r.metric, r.change, r.interval) for r in comparison.regressions]
    identical = compare_runs(tmp_path / "a", tmp_path / "a", CompareOptions(use_index=False))
    assert {r.outcome for r in identical.results} == {"no change"}


def test_mismatched_setups_are_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run(tmp_path, "base", seed=1)
    make_run(
        tmp_path,
        "other",
        seed=2,
        campaign_hash="different",
        machine={**MACHINE, "cpu_count": 64},
        server_version="2.0",
    )
    with pytest.raises(InputError) as info:
        compare_runs(tmp_path / "base", tmp_path / "other", CompareOptions(use_index=False))
    message = str(info.value)
    assert "campaign hash" in message
    assert "cpu_count" in message
    assert "version: 1.0 ≠ 2.0" in message
    assert "--force" in message
    assert main(["compare", str(tmp_path / "base"), str(tmp_path / "other"), "--no-index"]) == 2
    assert (
        main(["compare", str(tmp_path / "base"), str(tmp_path / "other"), "--no-index", "--force"])
        == 0
    )
    assert "setup differs (--force)" in capsys.readouterr().out


def _row(tid: str, dirname: str, key: str) -> TreatmentRow:
    return TreatmentRow(id=tid, dir=dirname, probe="load", params={}, params_key=key, status="PASS")


def test_pairing_by_params_when_ids_differ() -> None:
    base = [
        _row("a1", "001__x__a1", "k1"),
        _row("b1", "002__y__b1", "k2"),
        _row("gone", "003__z__gone", "k3"),
    ]
    cand = [
        _row("a1", "001__x__a1", "k1"),
        _row("b2", "002__y__b2", "k2"),
        _row("new", "004__w__new", "k4"),
    ]
    pairs, warnings = pair(base, cand)
    assert [(b.id, c.id) for b, c in pairs] == [("a1", "a1"), ("b1", "b2")]
    assert any("paired with 002__y__b1 by probe" in w for w in warnings)
    assert any("004__w__new: only in the candidate" in w for w in warnings)
    assert any("003__z__gone: only in the base" in w for w in warnings)


def test_noise_band_from_history(tmp_path: Path) -> None:
    """Three earlier runs spread widely: a candidate inside their spread is noise even
    though the bootstrap against one base would call it a regression."""
    url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    for name, ttft in (("h1", 20.0), ("h2", 27.0), ("h3", 24.0)):
        publish(
            make_run(tmp_path, name, seed=len(name) * 17 + int(ttft), ttft_ms=ttft),
            quiet,
            PublishOptions(index_url=url),
        )
    candidate = make_run(tmp_path, "cand", seed=99, ttft_ms=25.0)
    publish(candidate, quiet, PublishOptions(index_url=url))
    quiet.file.close()
    with_history = compare_runs(tmp_path / "h1", candidate, CompareOptions(index_url=url))
    p50 = next(
        r
        for r in with_history.results
        if r.metric == "ttft_ms.p50" and r.treatment.startswith("001")
    )
    assert p50.band is not None
    assert p50.band[2] == 3
    assert p50.outcome == "within noise"
    assert not with_history.failed
    without = compare_runs(tmp_path / "h1", candidate, CompareOptions(use_index=False))
    assert without.failed  # the same pair, judged by the bootstrap alone


def test_single_point_history_is_not_a_noise_band() -> None:
    threshold = parse_threshold("5%", "default")
    one = judge("t", "ttft_ms.p50", 10.0, 13.0, threshold, None, [10.0])
    assert one.band is None
    assert one.outcome == "unverified"
    two = judge("t", "ttft_ms.p50", 10.0, 13.0, threshold, None, [10.0, 10.1])
    assert two.outcome == "regression"  # outside the noise band of two close earlier runs
    spread = judge("t", "ttft_ms.p50", 10.0, 13.0, threshold, None, [10.0, 11.0])
    assert spread.outcome == "within noise"  # two runs 10 % apart: 13 is not surprising
    many = judge("t", "ttft_ms.p50", 10.0, 13.0, threshold, None, [10.0, 11.0] * 10)
    assert many.outcome == "regression"  # twenty runs pin the noise down
    same = judge("t", "ttft_ms.p50", 10.0, 10.0, threshold, None, [10.0, 10.0])
    assert same.outcome == "no change"  # a zero-width band never flags an unchanged value
    better = judge("t", "throughput.requests_per_s", 10.0, 13.0, threshold, None, [10.0, 10.1])
    assert better.outcome == "improvement"


def test_judge_rules_with_intervals() -> None:
    t = parse_threshold("10%", "x")
    ev = lambda low, high: Evidence("m", (low, high), (low * 10, high * 10))  # noqa: E731
    assert judge("t", "ttft_ms.p50", 10, 13, t, ev(0.2, 0.4), []).outcome == "regression"
    assert judge("t", "ttft_ms.p50", 10, 13, t, ev(0.05, 0.5), []).outcome == "possible regression"
    assert judge("t", "ttft_ms.p50", 10, 13, t, ev(-0.1, 0.6), []).outcome == "not significant"
    assert judge("t", "ttft_ms.p50", 10, 10.5, t, ev(0.04, 0.06), []).outcome == "no change"
    assert judge("t", "ttft_ms.p50", 10, 7, t, ev(-0.4, -0.2), []).outcome == "improvement"
    assert (
        judge("t", "throughput.requests_per_s", 10, 7, t, ev(-0.4, -0.2), []).outcome
        == "regression"
    )
    assert judge("t", "harness.cpu_ms_per_request", 10, 20, t, None, []).direction == 0


def test_verdict_flip_is_a_regression(tmp_path: Path) -> None:
    base = make_run(tmp_path, "base", seed=1)
    cand = make_run(tmp_path, "cand", seed=1)
    summary_path = cand / "001__sim-c1__t0001aaaa" / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["verdict"] = {"status": "FAIL", "reason": "ttft_ms p99 99 ms > 50 ms", "evidence": {}}
    summary_path.write_text(json.dumps(summary))
    comparison = compare_runs(base, cand, CompareOptions(use_index=False))
    assert comparison.failed
    assert comparison.verdict_changes[0]["kind"] == "regression"


def test_thresholds() -> None:
    parsed = parse_thresholds(["ttft_ms.p99=10%", "ttft_ms.*=20%", "*=2%", "itl_ms.p50=0.5"])
    assert threshold_for("ttft_ms.p99", parsed).value == pytest.approx(0.10)
    assert threshold_for("ttft_ms.p50", parsed).value == pytest.approx(0.20)
    assert threshold_for("e2e_ms.p50", parsed).value == pytest.approx(0.02)
    absolute = threshold_for("itl_ms.p50", parsed)
    assert not absolute.relative
    assert absolute.exceeded(5.0, 5.6)
    assert not absolute.exceeded(5.0, 5.4)
    assert threshold_for("x", {}).source == "default"
    with pytest.raises(InputError):
        parse_thresholds(["ttft_ms.p99"])
    with pytest.raises(InputError):
        parse_thresholds(["ttft_ms.p99=fast"])
