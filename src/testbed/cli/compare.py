"""``testbed compare BASE CANDIDATE``: improvements and regressions of a candidate run
against a base run, with their evidence; exit 1 on a significant regression beyond its
threshold (see :mod:`testbed.report.compare` for the rules)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "compare", help="baseline vs candidate run directories, exit 1 on a regression"
    )
    parser.add_argument("base", metavar="BASE", help="the baseline run directory")
    parser.add_argument("candidate", metavar="CANDIDATE", help="the candidate run directory")
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="smallest change that matters, e.g. ttft_ms.p99=10%% or 'itl_ms.*=0.5'"
        " (ms, absolute); repeatable; default 5%%",
    )
    parser.add_argument(
        "--metric", action="append", default=[], metavar="GLOB", help="compare only these"
    )
    parser.add_argument("--force", action="store_true", help="compare runs whose setups differ")
    parser.add_argument("--index", metavar="URL", help="results index with the history")
    parser.add_argument("--no-index", action="store_true", help="no history, no noise band")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval level")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--json", metavar="FILE", help="also write the comparison as JSON")
    parser.add_argument("--all", action="store_true", help="list unchanged metrics too")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from testbed.core.errors import InputError
    from testbed.report import compare_view
    from testbed.report.compare import CompareOptions, compare_runs
    from testbed.report.thresholds import parse_thresholds
    from testbed.results.files import write_json
    from testbed.results.verdict import exit_code

    if not 0.5 < args.confidence < 1 or args.resamples < 100:
        raise InputError("--confidence must be in (0.5, 1) and --resamples at least 100")
    options = CompareOptions(
        thresholds=parse_thresholds(args.threshold),
        force=args.force,
        index_url=args.index,
        use_index=not args.no_index,
        metrics=args.metric,
        confidence=args.confidence,
        resamples=args.resamples,
    )
    comparison = compare_runs(Path(args.base), Path(args.candidate), options)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # CI logs: a wide table beats a folded one
    compare_view.render(comparison, console, show_all=args.all)
    if args.json:
        write_json(Path(args.json), compare_view.document(comparison))
    return exit_code(comparison.status)
