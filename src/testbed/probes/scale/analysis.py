"""The plotter's step: ``submitted.json`` + ``sampled.json`` → ``times.csv``, PNGs, summary,
verdict. Reads only files, so it runs any time, also while the submitter and the sampler
are still writing (a torn last submission line is skipped; ``sampled.json`` is replaced
atomically)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.config.scale import STAGES, StageThreshold
from testbed.core.errors import InputError
from testbed.probes.scale import plots, sampled, submitted, times, verdict
from testbed.results.verdict import Verdict


@dataclass
class Analysis:
    table: list[times.Row]
    shown: list[times.Row]
    until_ms: float
    files: list[str] = field(default_factory=list)
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdict: Verdict | None = None

    def summary(self) -> dict[str, Any]:
        errors = [r for r in self.table if r.error]
        return {
            "scale": {
                "workloads": len(self.table),
                "errors": len(errors),
                "reached": {s: sum(s in r.stages for r in self.table) for s in STAGES},
                "intervals": self.stages,
                "files": self.files,
            }
        }


def analyze(
    out_dir: Path,
    *,
    plot: str = "general",
    head: int | None = None,
    tail: int | None = None,
    skip_errors: bool = False,
    thresholds: Sequence[StageThreshold] = (),
    max_errors: int = 0,
    draw: bool = True,
) -> Analysis:
    """Build the table, write ``times.csv`` and ``<plot>.png``; judge the thresholds on
    every workload (head, tail and skip-errors choose what is drawn, not what is judged)."""
    subs = submitted.load(out_dir)
    if subs.header is None:
        raise InputError(
            f"{out_dir / submitted.SUBMITTED} does not exist or has no header — run"
            f" `testbed scale submit -o {out_dir}` first"
        )
    facts = sampled.load(out_dir)
    table = times.rows(subs, facts)
    until = max(facts.observed_until_ms, max((r.submitted_ms for r in table), default=0.0))
    shown = times.select(table, head, tail, skip_errors)
    result = Analysis(table, shown, until)
    times.write_csv(out_dir / times.TIMES_CSV, shown)
    result.files.append(times.TIMES_CSV)
    if draw:
        result.files.append(plots.write(out_dir / f"{plot}.png", shown, until, plot).name)
    chain = plots.chain(table, "detailed")
    for start, end in itertools.pairwise(chain):
        curve = verdict.interval_survival(table, start, end, until)
        result.stages[f"{start}→{end}"] = verdict.summary(curve)
    if "submitted" in chain and "running" in chain:
        curve = verdict.interval_survival(table, "submitted", "running", until)
        result.stages["submitted→running"] = verdict.summary(curve)
    result.verdict = verdict.judge(table, until, thresholds, max_errors)
    return result


def lines(result: Analysis) -> list[str]:
    """The terminal summary: per interval, its quantiles and how many are still waiting."""
    out = [f"{len(result.table)} workload(s), {sum(1 for r in result.table if r.error)} in error"]
    for name, stat in result.stages.items():
        quantiles = "  ".join(
            f"{k.removesuffix('_ms')} {'n/a' if v is None else f'{v:.1f} ms'}"
            for k, v in stat.items()
            if k.endswith("_ms")
        )
        out.append(
            f"  {name:<28} {quantiles}   reached {stat['reached']} waiting {stat['waiting']}"
        )
    for row in result.table:
        if row.error:
            out.append(f"  error {row.name}: {row.error}")
            if len(out) > 40:
                out.append("  … (see times.csv)")
                break
    return out
