"""``testbed report DIR``: re-render a run's summary, JUnit XML and HTML report from its
directory alone, print the terminal summary, record it in the results index; exit with the
code of the run's status (the same as ``testbed run`` gave).

``testbed report s3://bucket/prefix`` or ``testbed report DIR1 DIR2 …`` first assembles the
run folders found there (one per task of an exported pipeline) into one run directory
(``--out``), the campaign's whole plan with NOT RUN for what no folder holds
(:mod:`testbed.report.assemble`), then reports that.

``testbed report FILE`` renders another harness's results — an llm-d Benchmark Report, a
guidellm, vLLM benchmark or inference-perf result (:mod:`testbed.report.foreign_run`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from testbed.cli.exit_policy import add_fail_on, fail_on
from testbed.cli.publish_options import add_publish_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("report", help="render a run directory: terminal, HTML, JUnit, JSON")
    parser.add_argument(
        "dir",
        metavar="DIR",
        nargs="+",
        help="the run directory; or several run folders, or an s3://bucket/prefix holding"
        " them (one per exported task): assembled into one run; or a Benchmark Report,"
        " guidellm, vLLM benchmark or inference-perf results file",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where an assembled run is written (default: runs/<stamp>-<campaign>-assembled)",
    )
    parser.add_argument(
        "--html", metavar="PATH", help="write the HTML here (default DIR/report.html)"
    )
    parser.add_argument("--open", action="store_true", help="open the HTML report in a browser")
    add_publish_options(parser, no_index=True)
    add_fail_on(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from testbed.report.run_summary import HTML, PublishOptions, publish

    html_path = Path(args.html) if args.html else None
    code = _foreign(args, html_path)
    if code is not None:
        return code
    run_path = _run_path(args)
    options = PublishOptions(
        index_url=args.index,
        use_index=not args.no_index,
        upload=args.upload,
        s3_endpoint_url=args.s3_endpoint_url,
        html_path=html_path,
        fail_on=fail_on(args),
    )
    code = publish(run_path, Console(), options)
    if args.open:
        import webbrowser

        webbrowser.open((html_path or run_path / HTML).resolve().as_uri())
    return code


def _foreign(args: argparse.Namespace, html_path: Path | None) -> int | None:
    """Another harness's results file, rendered; None when DIR is no such file."""
    from rich.console import Console

    from testbed.core.errors import InputError
    from testbed.report import foreign_run
    from testbed.results import foreign

    results = foreign.read(Path(args.dir[0])) if len(args.dir) == 1 else None
    if results is None:
        return None
    if args.out or args.upload:
        raise InputError(f"{args.dir[0]} is a results file: --out and --upload are for runs")
    to = foreign_run.PublishTo(html_path, args.index, not args.no_index, fail_on(args))
    code = foreign_run.publish(results, Console(), to)
    if args.open:
        import webbrowser

        webbrowser.open((html_path or foreign_run.default_html(results)).resolve().as_uri())
    return code


def _run_path(args: argparse.Namespace) -> Path:
    """The run directory to report: DIR itself, or the one assembled from the sources."""
    import tempfile

    from rich.console import Console

    from testbed.core.errors import InputError
    from testbed.report.assemble import assemble, gather, is_assembly

    sources: list[str] = args.dir
    if not is_assembly(sources):
        if args.out:
            raise InputError("--out is for assembling several run folders; DIR is one run")
        return Path(sources[0])
    with tempfile.TemporaryDirectory(prefix="testbed-report-") as cache:
        folders = gather(sources, Path(cache), args.s3_endpoint_url)
        run_dir = assemble(folders, Path(args.out) if args.out else None, Path("runs"))
    console = Console(stderr=True)
    console.print(f"assembled {len(folders)} run folders into [bold]{run_dir.path}[/bold]")
    return run_dir.path
