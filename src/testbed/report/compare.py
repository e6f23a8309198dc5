"""``testbed compare BASE CANDIDATE``: is the candidate run worse than the base run?

1. **Setups must match.** Runs of different campaigns (campaign hash), machines (hostname,
   CPUs) or server versions are refused unless forced: such differences are not regressions.
2. **Treatments are paired** by id (the hash of the fully resolved configuration); a
   treatment whose id changed but whose probe, deployments and factor values did not is
   paired by those, with a warning.
3. **Each metric is judged in its direction** (lower latency is better, higher throughput
   is better; metrics with no known direction are never judged) against its threshold
   (``--threshold`` flags, then the campaign's ``results.thresholds``, then 5 %). A change
   within its threshold is *no change*. Beyond it:
   - *regression* (fails the comparison) when the bootstrap interval of the change,
     computed from both runs' records (:mod:`testbed.results.stats`), lies entirely beyond
     the threshold in the worse direction — we are confident the change exceeds it;
   - *possible regression* when the interval excludes zero but reaches inside the
     threshold, *not significant* when it includes zero (both reported, neither fails);
   - *within noise* when the index holds ≥ 2 earlier runs of the same configuration and the
     candidate lies inside their noise band (the prediction interval of a new run,
     :func:`testbed.results.stats.noise_band`, wide when the runs are few); outside it,
     with no interval, the band alone decides;
   - *unverified* when there is neither an interval nor a band (a metric the records
     cannot give, a percentile too extreme for the sample size, single-point history):
     reported, never failing. One earlier run is not a noise estimate.
   The same tests in the better direction give *improvements*: reported, never failures.
4. A verdict that went from PASS to FAIL is a regression too.

BASE and CANDIDATE may also be two *treatment* directories (``runs/R/003__…``), of one run or
of two: those two are compared with each other whatever their factors — one picker against
another — and the outcome line says which is better. No history is consulted then. A
``testbed load --out`` folder is one treatment too (:mod:`testbed.report.load_run`): it
compares with another load folder, or with a treatment directory, in the same way, and so
does another harness's results file — a Benchmark Report, or a guidellm / vLLM benchmark /
inference-perf result converted to one (:mod:`testbed.report.foreign_run`): metrics without
records, judged *unverified*; the comparison says which metrics both sides have and the
caveats of the other tool's numbers.

What a side is, whether two setups compare and which treatments pair is
:mod:`testbed.report.compare_sides`; this module judges the pairs.

A pair whose treatment was SKIPPED on a side is listed (``skipped``), not compared. The exit
code follows the status: FAIL (1) on any regression, else ERROR (3) when a candidate
treatment has no result to compare, else SKIPPED (5, nothing was tested) when nothing was
compared at all — no treatment paired, every pair skipped on a side, or no metric both sides
have — with the reason (:attr:`Comparison.nothing_compared`), else PASS (0).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testbed.core.errors import InputError
from testbed.report import foreign_run
from testbed.report.compare_sides import is_side, is_treatment, pair, setup_differences, side
from testbed.report.metric_change import MetricResult, intervals, judge
from testbed.report.run_summary import campaign_results, run_document
from testbed.report.thresholds import Threshold, parse_threshold, threshold_for
from testbed.results.index import Point, ResultsIndex, resolve_url
from testbed.results.run_summary import RunSummary, TreatmentRow
from testbed.results.rundir import RunDir
from testbed.results.summaries import NEUTRAL, direction
from testbed.results.verdict import Status

#: Statuses of a treatment that has no measurement to compare.
_NO_RESULT = {Status.ERROR.value, Status.NOT_RUN.value}


@dataclass
class CompareOptions:
    thresholds: dict[str, Threshold] = field(default_factory=dict)  # from the command line
    force: bool = False
    index_url: str | None = None
    use_index: bool = True
    metrics: Sequence[str] = ()  # globs; empty: every metric with a direction
    confidence: float = 0.95
    resamples: int = 1000


@dataclass
class Comparison:
    base: Path
    candidate: Path
    setup_differences: list[str]
    warnings: list[str] = field(default_factory=list)
    results: list[MetricResult] = field(default_factory=list)
    verdict_changes: list[dict[str, str]] = field(default_factory=list)
    treatments: bool = False  # two treatment directories, not two runs

    @property
    def regressions(self) -> list[MetricResult]:
        return [r for r in self.results if r.outcome == "regression"]

    @property
    def improvements(self) -> list[MetricResult]:
        return [r for r in self.results if r.outcome == "improvement"]

    unresolved: list[str] = field(default_factory=list)  # candidate dirs with no result
    #: what could be compared with another harness's results, and what not
    notes: list[str] = field(default_factory=list)
    pairs: int = 0  # treatment pairs found
    #: pairs not compared because a side was SKIPPED, each with the skip's reason
    skipped: list[str] = field(default_factory=list)

    @property
    def nothing_compared(self) -> str | None:
        """Why nothing at all was compared (None when something was): a comparison that
        judged no metric and no verdict must not read as "no regression"."""
        if self.results or self.verdict_changes:
            return None
        if not self.pairs:
            return "nothing was compared: no treatment of the candidate pairs with the base's"
        if len(self.skipped) == self.pairs:
            return (
                f"nothing was compared: every pair ({self.pairs}) was skipped on a side;"
                f" first: {self.skipped[0]}"
            )
        return (
            "nothing was compared: no metric both sides have (with a direction, and matching"
            " --metric when given)"
        )

    @property
    def failed(self) -> bool:
        return bool(self.regressions) or any(
            v["kind"] == "regression" for v in self.verdict_changes
        )

    @property
    def status(self) -> Status:
        """The comparison's status (see the module docstring's last paragraph)."""
        if self.failed:
            return Status.FAIL
        if self.unresolved:
            return Status.ERROR
        return Status.SKIPPED if self.nothing_compared else Status.PASS


def compare_treatments(base: Path, candidate: Path, options: CompareOptions) -> Comparison:
    """Compare two treatments with each other — treatment directories of runs, ``testbed
    load`` folders, or another harness's results (see the module docstring)."""
    (base_root, base_doc, base_row), (cand_root, cand_doc, cand_row) = map(side, (base, candidate))
    alone = [p for p in (base, candidate) if not is_treatment(p)]  # each its own run
    same_run = not alone and base_root.resolve() == cand_root.resolve()
    differences = [] if same_run else setup_differences(base_doc, cand_doc)
    if differences and not options.force:
        raise InputError(
            "the treatments' runs have different setups:\n  " + "\n  ".join(differences)
            + "\ncompare treatments of one campaign on one machine, or pass --force"
        )  # fmt: skip
    for path, row in ((base, base_row), (candidate, cand_row)):
        if row.status in _NO_RESULT:
            raise InputError(f"{path}: not a treatment with a result ({row.status})")
    comparison = Comparison(base, candidate, differences, treatments=True)
    comparison.warnings += foreign_run.warnings((base, candidate))
    if any(doc.run.get("kind") == foreign_run.KIND for doc in (base_doc, cand_doc)):
        comparison.notes = foreign_run.comparable_metrics(base_row, cand_row)
    no_history = CompareOptions(**{**options.__dict__, "use_index": False})
    thresholds = {**_campaign_thresholds(cand_root), **options.thresholds}
    history = _History(cand_root, cand_doc, no_history)
    _verdict_change(comparison, base_row, cand_row)
    comparison.pairs = 1
    if _skipped(comparison, base_row, cand_row):
        return comparison
    comparison.results = _compare_pair(
        base_root, cand_root, base_row, cand_row, thresholds, no_history, history
    )
    return comparison


def compare_runs(base: Path, candidate: Path, options: CompareOptions) -> Comparison:
    """Compare two run directories, or two treatment directories (see the module
    docstring)."""
    if is_side(base) and is_side(candidate):
        return compare_treatments(base, candidate, options)
    for path in (base, candidate):
        if is_side(path):
            raise InputError(
                f"{path} is one treatment (a `testbed load` folder or another harness's"
                " results):"
                " compare it with another, or with a run's treatment directory"
                " (runs/<run>/NNN__…), not with a whole run"
            )
    base_doc = run_document(RunDir.existing(base))
    cand_doc = run_document(RunDir.existing(candidate))
    differences = setup_differences(base_doc, cand_doc)
    if differences and not options.force:
        raise InputError(
            "the runs' setups differ, so their numbers are not comparable:\n  "
            + "\n  ".join(differences)
            + "\ncompare runs of one campaign on one machine, or pass --force"
        )
    comparison = Comparison(base, candidate, differences)
    pairs, comparison.warnings = pair(base_doc.treatments, cand_doc.treatments)
    comparison.pairs = len(pairs)
    thresholds = {**_campaign_thresholds(candidate), **options.thresholds}
    history = _History(candidate, cand_doc, options)
    try:
        for base_row, cand_row in pairs:
            _verdict_change(comparison, base_row, cand_row)
            if cand_row.status in _NO_RESULT:
                comparison.unresolved.append(cand_row.dir)
            if {cand_row.status, base_row.status} & _NO_RESULT:
                comparison.warnings.append(f"{cand_row.dir}: not compared (a side has no result)")
                continue
            if _skipped(comparison, base_row, cand_row):
                continue
            comparison.results += _compare_pair(
                base, candidate, base_row, cand_row, thresholds, options, history
            )
    finally:
        history.close()
    return comparison


def _skipped(comparison: Comparison, base_row: TreatmentRow, cand_row: TreatmentRow) -> bool:
    """Whether a side of the pair was SKIPPED (then it is listed, with why, not compared)."""
    sides = [(n, r) for n, r in (("base", base_row), ("candidate", cand_row))
             if r.status == Status.SKIPPED.value]  # fmt: skip
    if not sides:
        return False
    said = "; ".join(f"SKIPPED in the {n}: {r.reason or 'no reason given'}" for n, r in sides)
    comparison.skipped.append(f"{cand_row.dir}: {said}")
    return True


def _verdict_change(comparison: Comparison, base_row: TreatmentRow, cand_row: TreatmentRow) -> None:
    before, after = base_row.status, cand_row.status
    if before == after or {before, after} - {"PASS", "FAIL"}:
        return
    kind = "regression" if after == "FAIL" else "improvement"
    comparison.verdict_changes.append(
        {"treatment": cand_row.dir, "base": before, "candidate": after, "kind": kind,
         "reason": cand_row.reason}
    )  # fmt: skip


def _campaign_thresholds(run: Path) -> dict[str, Threshold]:
    section = campaign_results(run).get("thresholds") or {}
    if not isinstance(section, Mapping):
        return {}
    return {str(k): parse_threshold(str(v), str(k)) for k, v in section.items()}


class _History:
    """Noise bands from the results index (earlier runs of the same configurations)."""

    def __init__(self, candidate: Path, cand_doc: RunSummary, options: CompareOptions):
        self.run_id = cand_doc.run["run_id"]
        self.index: ResultsIndex | None = None
        if not options.use_index:
            return
        configured = campaign_results(candidate).get("index")
        url = resolve_url(options.index_url, configured, candidate.parent)
        default_file = (candidate.parent / "index.sqlite").resolve()
        if url == f"sqlite:///{default_file}" and not default_file.is_file():
            return  # no index beside the runs: no history, and none is created
        self.index = ResultsIndex(url)

    def band(self, metric: str, row: TreatmentRow, paired_by_id: bool) -> list[Point]:
        if self.index is None:
            return []
        if paired_by_id:
            return self.index.history(metric, config_hash=row.id, exclude=[self.run_id])
        return self.index.history(metric, params_key=row.params_key, exclude=[self.run_id])

    def close(self) -> None:
        if self.index is not None:
            self.index.close()


def _compare_pair(
    base: Path,
    candidate: Path,
    base_row: TreatmentRow,
    cand_row: TreatmentRow,
    thresholds: Mapping[str, Threshold],
    options: CompareOptions,
    history: _History,
) -> list[MetricResult]:
    names = [
        m
        for m in cand_row.metrics
        if m in base_row.metrics
        and direction(m) != NEUTRAL
        and (not options.metrics or any(fnmatch.fnmatchcase(m, p) for p in options.metrics))
    ]
    if not names:
        return []
    evidence = intervals(
        (base / base_row.dir, candidate / cand_row.dir),
        cand_row.id,
        names,
        options.confidence,
        options.resamples,
    )
    out = []
    for name in names:
        b, c = base_row.metrics[name], cand_row.metrics[name]
        points = history.band(name, cand_row, base_row.id == cand_row.id)
        out.append(
            judge(
                cand_row.dir,
                name,
                b,
                c,
                threshold_for(name, thresholds),
                evidence.get(name),
                [p.value for p in points],
                options.confidence,
            )
        )
    return out
