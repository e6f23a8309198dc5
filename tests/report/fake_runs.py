"""Run directories as ``testbed run`` leaves them, built without servers: load treatments
with records drawn from a seeded latency model (summaries computed with the real metric
formulas), a correctness treatment with a failure, an A/B treatment with keys this report
does not know. For the report and compare tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from testbed.results import metrics
from testbed.results.files import write_json

MS = 1_000_000
MACHINE = {"hostname": "box", "cpu_count": 2, "cpu_model": "cpu", "machine": "x86_64"}


def load_records(
    n: int, ttft_ms: float, itl_ms: float, seed: int, tokens: int = 16, concurrency: int = 4
) -> list[dict[str, Any]]:
    """``n`` streamed requests of a closed loop at ``concurrency``, lognormal latencies."""
    rng = np.random.default_rng(seed)
    free = [10_000 * MS] * concurrency
    out = []
    for i in range(n):
        slot = int(np.argmin(free))
        sent = free[slot] + int(rng.integers(0, 200_000))
        first = sent + int(rng.lognormal(np.log(ttft_ms), 0.25) * MS)
        gaps = rng.lognormal(np.log(itl_ms), 0.2, tokens - 1) * MS
        chunks = [first, *(first + np.cumsum(gaps)).astype(np.int64).tolist()]
        done = chunks[-1] + 100_000
        free[slot] = done
        out.append(
            {
                "stage": "main",
                "n": i,
                "sent_ns": sent,
                "chunks_ns": [int(c) for c in chunks],
                "done_ns": int(done),
                "failed_ns": None,
                "status": 200,
                "error": None,
                "output_tokens": tokens,
            }
        )
    return out


def load_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    sends = [r["sent_ns"] for r in records]
    win = metrics.window(min(sends), max(sends) + 1, 0.0, 0.0)
    inside = metrics.in_window(records, win)
    return {
        "profile": "concurrency",
        "stage": "main",
        **metrics.latency(inside),
        "throughput": {**metrics.throughput(records, win), "goodput_requests_per_s": None},
        "harness": {"cpu_ms_per_request": 0.4},
        "requests": {
            "total": len(records),
            "ok": len(records),
            "errors": 0,
            "in_window": len(inside),
            "success_ratio": 1.0,
        },
        "window": {"start_ns": win.start_ns, "end_ns": win.end_ns, "seconds": win.seconds},
        "future_key": {"added": "by a newer probe"},
    }


def make_run(
    root: Path,
    name: str,
    *,
    ttft_ms: float = 20.0,
    itl_ms: float = 5.0,
    n: int = 300,
    seed: int = 0,
    levels: tuple[int, ...] = (1, 4),
    campaign_hash: str = "c0ffee",
    machine: dict[str, Any] | None = None,
    server_version: str = "1.0",
    extras: bool = False,
) -> Path:
    """A finished run directory ``root/name`` with one load treatment per level."""
    path = root / name
    path.mkdir(parents=True)
    worker = {
        "id": "w1",
        "deployment": "sim",
        "server": "sim",
        "params": {},
        "settings": {"itl_ms": itl_ms},
        "config": {},
    }
    treatments = []
    for index, level in enumerate(levels, start=1):
        tid = f"t{level:04d}aaaa"
        dirname = f"{index:03d}__sim-c{level}__{tid}"
        params = {"load.concurrency": level}
        records = load_records(
            n, ttft_ms * (1 + 0.1 * level), itl_ms, seed + level, concurrency=level
        )
        folder = path / dirname
        folder.mkdir()
        (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        write_json(
            folder / "summary.json",
            {
                "schema_version": 1,
                "id": tid,
                "dir": dirname,
                "probe": "load",
                "params": params,
                "workers": [
                    {
                        "id": "w1",
                        "deployment": "sim",
                        "server": "sim",
                        "pid": 1,
                        "argv": ["sim", "--port", "1"],
                        "port": 1,
                        "version": server_version,
                    }
                ],
                "attempt": 1,
                "started": "2026-01-01T00:00:00Z",
                "duration_s": 1.5,
                "records": len(records),
                "verdict": {"status": "PASS", "reason": "SLOs met", "evidence": {"slo": None}},
                **load_summary(records),
            },
        )
        treatments.append(_plan_row(index, tid, dirname, "load", params))
    if extras:
        treatments += _extras(path, len(treatments))
    plan = {"campaign": "demo", "treatments": treatments, "workers": [worker], "notes": []}
    write_json(path / "plan.json", plan)
    campaign = {
        "name": "demo",
        "deployments": [
            {"name": "sim", "server": "sim", "params": {"token": "${env:SECRET_TOKEN}"}}
        ],
    }
    (path / "campaign.resolved.yaml").write_text(yaml.safe_dump(campaign))
    write_json(
        path / "run.json",
        {
            "run_id": name,
            "campaign": "demo",
            "campaign_hash": campaign_hash,
            "started": f"2026-01-01T00:00:{len(name) % 60:02d}Z",
            "testbed_version": "0.1.0",
            "machine": machine or MACHINE,
        },
    )
    return path


def _plan_row(
    index: int, tid: str, dirname: str, probe: str, params: dict[str, Any]
) -> dict[str, Any]:
    return {
        "index": index,
        "id": tid,
        "dir": dirname,
        "slug": dirname.split("__")[1],
        "probe": probe,
        "worker": "w1",
        "workers": ["w1"],
        "status": "planned",
        "reason": "",
        "params": params,
        "config": {},
    }


def _extras(path: Path, count: int) -> list[dict[str, Any]]:
    """A failed correctness treatment and an A/B treatment with unknown summary keys."""
    rows = []
    cid, cdir = "corr000001", f"{count + 1:03d}__sim-cases__corr000001"
    (path / cdir).mkdir()
    (path / cdir / "records.jsonl").write_text("")
    write_json(
        path / cdir / "summary.json",
        {
            "schema_version": 1,
            "id": cid,
            "dir": cdir,
            "probe": "correctness",
            "params": {},
            "verdict": {
                "status": "FAIL",
                "reason": "1 of 2 failed; first: capital/openai",
                "evidence": {"cases": {"total": 2, "failed": 1}},
            },
            "cases": {
                "total": 3,
                "passed": 1,
                "unchecked": 1,
                "failed": 1,
                "errored": 0,
                "skipped": 0,
            },
            "failures": [
                {
                    "case": "capital/openai",
                    "evaluator": "exact",
                    "detail": "text differs",
                    "expected": "The capital of France is Paris.",
                    "actual": "The capital of France is Lyon.",
                    "first_divergence": {
                        "index": 6,
                        "unit": "token",
                        "expected_token": " Paris",
                        "actual_token": " Lyon",
                        "common_prefix": "The capital of France is",
                        "expected_continuation": " Paris.",
                        "actual_continuation": " Lyon.",
                        "margin_nats": 0.01,
                        "near_tie": True,
                    },
                },
                {
                    "case": "plain/openai",
                    "evaluator": "exact",
                    "expected": "abc<def>",
                    "actual": "abX",
                },
            ],
            "errors": [],
            "skipped": [{"case": "big/tgi", "reason": "single_shard_only"}],
            "unchecked": [{"case": "free/openai", "reason": "answer not compared (skip_check)"}],
        },
    )
    rows.append(_plan_row(count + 1, cid, cdir, "correctness", {}))
    aid, adir = "abab000001", f"{count + 2:03d}__stable-vs-canary__abab000001"
    (path / adir).mkdir()
    write_json(
        path / adir / "summary.json",
        {
            "schema_version": 1,
            "id": aid,
            "dir": adir,
            "probe": "ab",
            "params": {},
            "verdict": {
                "status": "INCONCLUSIVE",
                "reason": "ttft ratio interval straddles 1.10",
                "evidence": {
                    "ttft_p50_ratio": {
                        "estimate": 1.05,
                        "low": 0.98,
                        "high": 1.12,
                        "threshold": 1.1,
                    }
                },
            },
            "agreement": {"rate": 0.97, "low": 0.93, "high": 0.99, "n": 100},
            "unknown_section": {"nested": {"deeper": [1, 2, 3]}},
        },
    )
    rows.append(_plan_row(count + 2, aid, adir, "ab", {}))
    return rows
