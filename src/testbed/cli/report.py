"""``testbed report DIR``: re-render a run's summary, JUnit XML and HTML report from its
directory alone, print the terminal summary, record it in the results index; exit with the
code of the run's status (the same as ``testbed run`` gave)."""

from __future__ import annotations

import argparse

from testbed.cli.exit_policy import add_fail_on, fail_on
from testbed.cli.publish_options import add_publish_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("report", help="render a run directory: terminal, HTML, JUnit, JSON")
    parser.add_argument("dir", metavar="DIR", help="the run directory")
    parser.add_argument(
        "--html", metavar="PATH", help="write the HTML here (default DIR/report.html)"
    )
    parser.add_argument("--open", action="store_true", help="open the HTML report in a browser")
    add_publish_options(parser, no_index=True)
    add_fail_on(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from testbed.report.run_summary import HTML, PublishOptions, publish

    html_path = Path(args.html) if args.html else None
    options = PublishOptions(
        index_url=args.index,
        use_index=not args.no_index,
        upload=args.upload,
        s3_endpoint_url=args.s3_endpoint_url,
        html_path=html_path,
        fail_on=fail_on(args),
    )
    code = publish(Path(args.dir), Console(), options)
    if args.open:
        import webbrowser

        webbrowser.open((html_path or Path(args.dir) / HTML).resolve().as_uri())
    return code
