"""``testbed history``: every configuration's metrics over the runs of the results index,
change points found by Apache Otava, an HTML page with one plot per metric; exit 1 when
the newest run carries a regression beyond the threshold (:mod:`testbed.results.history`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "history", help="metrics over the indexed runs, change points; exit 1 on a regression"
    )
    parser.add_argument("--index", metavar="URL", help="results index (default: runs/index.sqlite)")
    parser.add_argument("--runs", metavar="DIR", default="runs", help="where the runs are")
    parser.add_argument("--campaign", metavar="NAME", help="only this campaign's runs")
    parser.add_argument(
        "--metric", action="append", default=[], metavar="GLOB", help="only these metrics"
    )
    parser.add_argument(
        "--threshold",
        default="5%",
        metavar="PCT",
        help="smallest change of the segments' means that is a regression (default 5%%)",
    )
    parser.add_argument(
        "--max-pvalue", type=float, default=0.001, help="significance of a change point"
    )
    parser.add_argument("--html", metavar="PATH", help="the page (default: RUNS/history.html)")
    parser.add_argument("--json", metavar="FILE", help="also write the series as JSON")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from testbed.core.errors import EXIT_FAILED, EXIT_OK, InputError
    from testbed.report import history_html, history_view
    from testbed.results.files import write_atomic, write_json
    from testbed.results.history import find_change_points, gather
    from testbed.results.index import ResultsIndex, resolve_url, shown

    threshold = _threshold(args.threshold)
    if not 0 < args.max_pvalue < 1:
        raise InputError(f"--max-pvalue {args.max_pvalue}: give a probability in (0, 1)")
    runs = Path(args.runs)
    url = resolve_url(args.index, None, runs)
    if (
        url == f"sqlite:///{(runs / 'index.sqlite').resolve()}"
        and not (runs / "index.sqlite").is_file()
    ):
        raise InputError(f"no results index at {runs / 'index.sqlite'}: give --index or --runs")
    with ResultsIndex(url) as index:
        series = gather(index, args.campaign, args.metric)
    for one in series:
        find_change_points(one, args.max_pvalue)
    html = Path(args.html) if args.html else runs / "history.html"
    write_atomic(html, history_html.render(series, threshold, shown(url)))
    if args.json:
        write_json(Path(args.json), history_view.document(series, threshold))
    failing = history_view.render(series, threshold, Console())
    Console().print(f"history: {html}")
    return EXIT_FAILED if failing else EXIT_OK


def _threshold(text: str) -> float:
    from testbed.core.errors import InputError

    try:
        value = float(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        value = -1.0
    if not 0 <= value < 10:
        raise InputError(f"--threshold {text}: give a relative change such as 5% or 0.05")
    return value
