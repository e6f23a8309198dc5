"""The pure parts: facts that merge idempotently, the times table, Kaplan–Meier, thresholds,
the CSV and the plots, and `testbed scale plot|sample` on files alone — all from synthetic
objects shaped like the API's."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from testbed.cli import main
from testbed.config.scale import ScaleProbe, StageThreshold
from testbed.probes.scale import sampled, times
from testbed.probes.scale.analysis import analyze
from testbed.probes.scale.sampled import Facts
from testbed.probes.scale.stages import parse_time
from testbed.probes.scale.submitted import SUBMITTED, Header, Submission, Submitted, line
from testbed.probes.scale.survival import kaplan_meier
from testbed.probes.scale.verdict import check, judge
from testbed.results.verdict import Status

T0 = 1_800_000_000_000.0  # epoch ms


def iso(ms: float, fraction: bool = True) -> str:
    import datetime as dt

    moment = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    text = moment.isoformat(timespec="microseconds" if fraction else "seconds")
    return text.replace("+00:00", "Z")


def pod(
    name: str,
    workload: str,
    *,
    created: float,
    phase: str = "Pending",
    node: str = "",
    conditions: dict[str, float] | None = None,
) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": iso(created, False),
            "labels": {"testbed.io/scale-workload": workload},
        },
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {
            "phase": phase,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": iso(v, False)}
                for t, v in (conditions or {}).items()
            ],
        },
    }


def event(uid: str, reason: str, kind: str, name: str, at: float, message: str = "") -> dict:
    return {
        "metadata": {"uid": uid},
        "reason": reason,
        "eventTime": iso(at),
        "note": message,
        "regarding": {"kind": kind, "name": name, "namespace": "ns"},
    }


def submission(index: int, sent: float, status: str = "created", kind: str = "Job") -> Submission:
    return Submission(
        index=index,
        name=f"w-{index}",
        namespace="ns",
        kind=kind,
        api_version="batch/v1",
        sent_ms=sent,
        acked_ms=sent + 2,
        status=status,  # type: ignore[arg-type]
        error="quota exceeded" if status == "error" else None,
    )


def test_parse_time_knows_its_precision() -> None:
    assert parse_time(iso(T0, False)) == (T0, False)
    millis, fine = parse_time("2027-01-15T08:00:00.123456Z")  # type: ignore[misc]
    assert fine
    assert math.isclose(millis % 1000, 123.456, abs_tol=1e-3)
    assert parse_time("") is None
    assert parse_time(None) is None


def test_watch_time_only_for_transitions_seen_live() -> None:
    facts = Facts()
    p = pod("w-0-a", "w-0", created=T0)
    facts.observe_pod(p, T0 + 500, live=False)  # listed: its receive time says nothing
    assert "watch" not in facts.pods["ns/w-0-a"]["stages"]["pod_created"]
    running = pod("w-0-a", "w-0", created=T0, phase="Running", node="n1")
    facts.observe_pod(running, T0 + 900, live=True)
    stages = facts.pods["ns/w-0-a"]["stages"]
    assert stages["running"]["watch"] == T0 + 900
    assert stages["scheduled"]["watch"] == T0 + 900
    assert "watch" not in stages["pod_created"]  # it was there before


def test_one_sampler_keeps_the_earliest_time_of_a_stage_it_sees_again() -> None:
    facts = Facts()
    ready = pod("p", "w", created=T0, phase="Running", node="n", conditions={"Ready": T0 + 2000})
    facts.observe_pod(ready, T0 + 2500, live=False)
    # Ready flapped: False, then True again later — the stage was reached at the first time
    again = pod("p", "w", created=T0, phase="Running", node="n", conditions={"Ready": T0 + 7000})
    facts.observe_pod(again, T0 + 7500, live=False)
    (source,) = facts.pods["ns/p"]["stages"]["ready"].values()
    assert source == T0 + 2000


def test_merge_is_idempotent_commutative_and_keeps_earliest(tmp_path: Path) -> None:
    a, b = Facts(), Facts()
    a.observe_pod(pod("p", "w", created=T0), T0 + 10, live=True)
    b.observe_pod(pod("p", "w", created=T0, phase="Running", node="n"), T0 + 50, live=True)
    b.observe_event(event("e1", "Scheduled", "Pod", "p", T0 + 20.5), T0 + 30, live=True)
    ab, ba = Facts(), Facts()
    for first, second, into in ((a, b, ab), (b, a, ba)):
        into.merge(first)
        into.merge(second)
    assert ab.to_json() == ba.to_json()
    again = Facts.from_json(ab.to_json())
    again.merge(ab)
    assert again.to_json() == ab.to_json()
    assert ab.pods["ns/p"]["stages"]["pod_created"]["watch"] == T0 + 10
    sampled.save(tmp_path, a)
    sampled.save(tmp_path, b)
    sampled.save(tmp_path, b)
    assert sampled.load(tmp_path).to_json() == ab.to_json()


def _table() -> tuple[Submitted, Facts]:
    sub = Submitted(
        header=Header(run="r", prefix="w", namespace="ns", template="t", fingerprint="f")
    )
    facts = Facts()
    for i in range(3):
        sent = T0 + i * 1000
        sub.workloads[i] = submission(i, sent)
        sub.workloads[i].expected_pods = 2
        job = {
            "kind": "Job",
            "metadata": {
                "name": f"w-{i}",
                "namespace": "ns",
                "creationTimestamp": iso(sent + 5, True),
                "labels": {"testbed.io/scale-workload": f"w-{i}"},
            },
        }
        facts.observe_object(job, sent + 6, live=True)
        for k in range(2 if i < 2 else 1):  # workload 2 has one pod of two: not scheduled yet
            name = f"w-{i}-{k}"
            facts.observe_pod(pod(name, f"w-{i}", created=sent + 10), sent + 11, live=True)
            facts.observe_event(
                event(
                    f"c{i}{k}",
                    "SuccessfulCreate",
                    "Job",
                    f"w-{i}",
                    sent + 10.25 + k,
                    f"Created pod: {name}",
                ),
                sent + 12,
                live=True,
            )
            facts.observe_event(
                event(f"s{i}{k}", "Scheduled", "Pod", name, sent + 100 + 100 * k),
                sent + 300,
                live=True,
            )
            facts.observe_pod(
                pod(name, f"w-{i}", created=sent + 10, phase="Running", node="n"),
                sent + 400 + k,
                live=True,
            )
    sub.workloads[3] = submission(3, T0 + 3000, status="error")
    facts.observed_until_ms = T0 + 5000
    return sub, facts


def test_rows_take_the_last_pod_of_a_gang_and_prefer_event_times() -> None:
    table = times.rows(*_table())
    first = table[0]
    assert first.stages["created"] == pytest.approx(T0 + 5)
    assert first.sources["scheduled"] == "event"
    assert first.stages["scheduled"] == pytest.approx(T0 + 200)  # the later of the two pods
    assert first.stages["pod_created"] == pytest.approx(T0 + 11.25)
    assert first.stages["running"] == pytest.approx(T0 + 401)
    assert "scheduled" not in table[2].stages  # one pod of two: not there yet
    assert table[3].error == "submit: quota exceeded"
    # the gang's first pod scheduled: the earlier of the two Scheduled events
    assert first.extra == {"gang.first_scheduled": pytest.approx(T0 + 100)}


def test_censored_workloads_count_in_the_quantiles() -> None:
    # 8 done in 1..8 s, 2 still waiting after 20 s: the p90 is not computable, yet p50 is
    curve = kaplan_meier([*range(1, 9), 20, 20], [True] * 8 + [False] * 2)
    assert curve.quantile(0.5) == 5
    assert curve.quantile(0.9) is None
    assert curve.fraction_done_by(8) == pytest.approx(0.8)
    # a censoring in the middle re-weights what follows (hand-computed): S(3) = 2/3 * 1/2
    curve = kaplan_meier([1, 2, 3, 4], [True, False, True, True])
    assert curve.fraction_done_by(3) == pytest.approx(1 - 0.75 * 0.5)


def test_thresholds_parse_and_are_validated() -> None:
    t = StageThreshold.model_validate("p99 scheduled→running < 5 s")
    assert (t.quantile, t.start, t.end, t.limit_ms, t.inclusive) == (
        0.99,
        "scheduled",
        "running",
        5000,
        False,
    )
    assert StageThreshold.model_validate("max submitted->created <= 250 ms").quantile == 1.0
    with pytest.raises(ValidationError, match="unknown stage 'sceduled'"):
        StageThreshold.model_validate("p99 sceduled→running < 5 s")
    with pytest.raises(ValidationError, match="does not come after"):
        StageThreshold.model_validate("p50 running→scheduled < 5 s")
    with pytest.raises(ValidationError, match=r"write e\.g\."):
        ScaleProbe(thresholds=["p99 fast"])  # type: ignore[list-item]


def test_verdict_pass_fail_inconclusive_with_evidence() -> None:
    table = times.rows(*_table())
    until = T0 + 5000
    ok = StageThreshold.model_validate("p50 scheduled→running < 1 s")
    assert check(ok, table, until)["status"] == "PASS"
    slow = StageThreshold.model_validate("p50 scheduled→running < 100 ms")
    evidence = check(slow, table, until)
    assert evidence["status"] == "FAIL"
    assert evidence["value_ms"] == pytest.approx(201)
    # workload 2 never got scheduled though it waited ~4.99 s: p99 created→scheduled > 1 s
    assert (
        check(StageThreshold.model_validate("p99 created→scheduled < 1 s"), table, until)["status"]
        == "FAIL"
    )
    waiting = check(StageThreshold.model_validate("p99 created→scheduled < 60 s"), table, until)
    assert waiting["status"] == "INCONCLUSIVE"
    assert waiting["waiting"] == 1
    verdict = judge(table, until, [ok], max_errors=0)
    assert verdict.status == Status.FAIL
    assert verdict.evidence["error_count"] == 1
    assert judge(table, until, [ok], max_errors=1).status == Status.PASS


def _write_dir(tmp_path: Path) -> Path:
    sub, facts = _table()
    with (tmp_path / SUBMITTED).open("w") as handle:
        handle.write(line(sub.header))  # type: ignore[arg-type]
        for s in sub.ordered():
            handle.write(line(s))
        handle.write('{"type": "workload", "ind')  # a torn last line: a submitter mid-write
    sampled.save(tmp_path, facts)
    return tmp_path


def test_analyze_writes_csv_and_plot_while_a_line_is_torn(tmp_path: Path) -> None:
    out = _write_dir(tmp_path)
    result = analyze(out, plot="detailed")
    with (out / "times.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["status"] for r in rows] == ["done", "done", "pending", "error"]
    assert float(rows[0]["scheduled_delta_ms"]) == pytest.approx(200 - 11.25, abs=1e-3)
    assert rows[1]["scheduled_source"] == "event"
    png = out / "detailed.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert png.stat().st_size > 10_000
    assert result.stages["scheduled→running"]["reached"] == 2
    skipped = analyze(out, skip_errors=True, head=2)
    assert len(skipped.shown) == 2


def test_whole_second_times_never_make_a_delta_negative() -> None:
    sent = T0 + 700.0  # creationTimestamp floors to T0, before the submission
    sub = Submitted(
        header=Header(run="r", prefix="w", namespace="ns", template="t", fingerprint="f")
    )
    sub.workloads[0] = submission(0, sent)
    facts = Facts()
    job = {
        "kind": "Job",
        "metadata": {"name": "w-0", "namespace": "ns", "creationTimestamp": iso(T0, False)},
    }
    facts.observe_object(job, sent + 50, live=False)
    p = pod(
        "w-0-a", "w-0", created=T0, node="n", conditions={"PodScheduled": T0, "Initialized": T0}
    )
    facts.observe_pod(p, sent + 60, live=False)
    facts.observe_event(event("s", "Scheduled", "Pod", "w-0-a", sent + 30.5), sent + 60, live=False)
    (row,) = times.rows(sub, facts)
    assert row.sources["created"] == "ack"
    assert row.stages["created"] == pytest.approx(sent + 2)  # the create call's return
    assert row.stages["scheduled"] == pytest.approx(sent + 30.5)
    assert row.sources["initialized"] == "field_s>prev"
    assert row.stages["initialized"] == row.stages["scheduled"]


def test_a_stage_only_a_relist_saw_is_raised_to_the_live_stage_before_it() -> None:
    """After a watch ends in 410 Gone, a stage reached in the gap is known only from the
    relist's whole-second field; the stage before it was seen live later in that second."""
    sent = T0 + 100.0
    sub = Submitted(
        header=Header(run="r", prefix="w", namespace="ns", template="t", fingerprint="f")
    )
    sub.workloads[0] = submission(0, sent)
    facts = Facts()
    facts.observe_pod(pod("w-0-a", "w-0", created=T0), sent + 5, live=True)
    scheduled = pod("w-0-a", "w-0", created=T0, node="n", conditions={"PodScheduled": T0})
    facts.observe_pod(scheduled, T0 + 700, live=True)  # seen live at .700, its field says T0
    relisted = pod(
        "w-0-a", "w-0", created=T0, node="n", conditions={"PodScheduled": T0, "Initialized": T0}
    )
    facts.observe_pod(relisted, T0 + 1500, live=False)  # only the relist knows Initialized
    (row,) = times.rows(sub, facts)
    assert row.sources["scheduled"] == "watch"
    assert row.stages["initialized"] == row.stages["scheduled"] == pytest.approx(T0 + 700)
    assert row.sources["initialized"] == "field_s>prev"
    reached = [row.stages[s] for s in times.STAGES if s in row.stages]
    assert reached == sorted(reached)


def test_a_late_observation_is_lowered_to_the_event_after_it() -> None:
    sent = T0 + 700.0
    sub = Submitted(
        header=Header(run="r", prefix="w", namespace="ns", template="t", fingerprint="f")
    )
    sub.workloads[0] = submission(0, sent)
    facts = Facts()
    job = {
        "kind": "Job",
        "metadata": {"name": "w-0", "namespace": "ns", "creationTimestamp": iso(T0, False)},
    }
    facts.observe_object(job, sent + 90, live=True)  # the watch saw it late
    facts.observe_pod(pod("w-0-a", "w-0", created=T0), sent + 95, live=False)
    facts.observe_event(
        event("c", "SuccessfulCreate", "Job", "w-0", sent + 20, "Created pod: w-0-a"), 0, False
    )
    facts.observe_event(event("s", "Scheduled", "Pod", "w-0-a", sent + 30), sent + 99, live=False)
    (row,) = times.rows(sub, facts)
    assert row.sources["created"] == "watch<next"
    assert row.stages["created"] == pytest.approx(sent + 20)  # no later than the pod it made
    assert row.stages["pod_created"] == pytest.approx(sent + 20)
    assert row.sources["pod_created"] == "event"


def test_job_and_podgroup_events_become_columns_and_pods_can_be_workloads(tmp_path: Path) -> None:
    sub, facts = _table()
    facts.observe_event(event("j", "Completed", "Job", "w-0", T0 + 900), T0 + 901, live=True)
    facts.observe_event(event("g", "Scheduled", "PodGroup", "w-0", T0 + 150), T0 + 151, live=True)
    done = {
        "kind": "Job",
        "metadata": {"name": "w-1", "namespace": "ns"},
        "status": {
            "conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": iso(T0 + 1950)},
                {
                    "type": "SuccessCriteriaMet",
                    "status": "True",
                    "lastTransitionTime": iso(T0 + 1940),
                },
            ]
        },
    }
    facts.observe_object(done, T0 + 1960, live=True)
    sub.workloads[4] = submission(4, T0 + 4000, kind="Pod")
    facts.observe_pod(
        pod("w-4", "w-4", created=T0 + 4000, phase="Running", node="n"), T0 + 4010, live=True
    )
    table = times.rows(sub, facts)
    assert table[0].extra == {
        "event.Job.Completed": pytest.approx(T0 + 900),
        "event.PodGroup.Scheduled": pytest.approx(T0 + 150),
        "gang.first_scheduled": pytest.approx(T0 + 100),
    }
    assert table[1].stages["completed"] == pytest.approx(T0 + 1950)
    assert table[1].extra["condition.SuccessCriteriaMet"] == pytest.approx(T0 + 1940)
    interactive = table[4]
    assert interactive.stages["created"] == interactive.stages["pod_created"]
    assert interactive.sources["running"] == "watch"
    times.write_csv(tmp_path / "t.csv", table)
    header = (tmp_path / "t.csv").read_text().splitlines()[0].split(",")
    assert "event.PodGroup.Scheduled_ms" in header
    assert "condition.SuccessCriteriaMet_ms" in header


def test_plot_exit_codes_follow_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _write_dir(tmp_path)
    assert (
        main(
            [
                "scale",
                "plot",
                "-o",
                str(out),
                "--threshold",
                "p50 scheduled→running < 1 s",
                "--max-errors",
                "1",
            ]
        )
        == 0
    )
    assert "PASS" in capsys.readouterr().out
    assert (
        main(
            [
                "scale",
                "plot",
                "-o",
                str(out),
                "--threshold",
                "p50 scheduled→running < 100 ms",
                "--max-errors",
                "1",
            ]
        )
        == 1
    )
    assert (
        main(["scale", "plot", "-o", str(out), "--threshold", "p50 running→scheduled < 1 s"]) == 2
    )
    assert main(["scale", "plot", "-o", str(tmp_path / "nothing")]) == 2
    assert "run `testbed scale submit" in capsys.readouterr().err


def test_sample_refuses_a_type_or_project_other_than_submitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _write_dir(tmp_path)
    assert main(["scale", "sample", "-o", str(out), "-p", "elsewhere"]) == 2
    assert "submitted with project 'ns', not 'elsewhere'" in capsys.readouterr().err


def test_a_scale_probe_without_a_cluster_is_refused_at_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: s\nbackend: local\nscale: {workloads: 3}\n")
    assert main(["validate", str(campaign)]) == 2
    assert "set `backend: kubernetes`" in capsys.readouterr().err
    campaign.write_text("name: s\nbackend: {kind: kubernetes}\nscale: {template: missing.yaml}\n")
    assert main(["validate", str(campaign)]) == 2
    assert "missing.yaml: cannot read it" in capsys.readouterr().err


def test_unlabelled_pods_join_their_workload_through_owner_references() -> None:
    """A custom kind's controller makes an unlabelled intermediate object and unlabelled
    pods: the owner chain pod → intermediate → workload object names the workload; a pod
    owned by nothing of ours stays out; a preempted pod times nothing but is an event."""
    sub = Submitted(
        header=Header(run="r", prefix="w", namespace="ns", template="t", fingerprint="f")
    )
    sub.workloads[0] = submission(0, T0, kind="TrainingWorkload")
    sub.workloads[0].expected_pods = 2
    facts = Facts()
    workload = {
        "kind": "TrainingWorkload",
        "metadata": {
            "name": "w-0",
            "namespace": "ns",
            "uid": "u-workload",
            "creationTimestamp": iso(T0 + 5),
            "labels": {"testbed.io/scale-workload": "w-0"},
        },
    }
    middle = {
        "kind": "PodGroup",
        "metadata": {
            "name": "w-0-group",
            "namespace": "ns",
            "uid": "u-middle",
            "ownerReferences": [{"uid": "u-workload", "kind": "TrainingWorkload"}],
        },
    }
    facts.observe_object(workload, T0 + 6, live=True)
    facts.observe_object(middle, T0 + 7, live=True)
    owners = {"u-1": "u-workload", "u-2": "u-middle", "u-3": "u-stranger", "u-4": "u-workload"}
    for name, owner in owners.items():
        body = pod(name, "", created=T0 + 20, phase="Running", node="n")
        body["metadata"]["labels"] = {}
        body["metadata"]["ownerReferences"] = [{"uid": owner, "kind": "X", "controller": True}]
        if name == "u-4":
            body["status"]["conditions"].append(
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
            )
        facts.observe_pod(body, T0 + 30, live=True)
    facts.observe_event(event("e1", "Preempted", "Pod", "u-4", T0 + 25), T0 + 26, live=True)
    again = Facts.from_json(facts.to_json())  # owners survive sampled.json
    [row] = times.rows(sub, again)
    assert row.pods == 2  # u-1 directly, u-2 through the intermediate object
    assert "running" in row.stages
    assert row.extra["event.Pod.Preempted"] == pytest.approx(T0 + 25)
