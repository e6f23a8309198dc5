"""The ``testbed`` command line: thin commands that parse, call the pipeline, return an exit code.

Each verb lives in its own module with ``register(subparsers)``; this module only builds the
parser and translates errors into the exit codes of DESIGN.md (an unexpected exception, a
bug, is exit 3 with its traceback in a file: never a traceback on the terminal, never exit
1). Command modules import nothing heavy at module level, so ``testbed --help`` starts in a
blink.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from testbed.core.errors import (
    EXIT_INFRA,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    TestbedError,
)

#: The command modules, in the order ``testbed --help`` lists them.
COMMANDS = (
    "plan",
    "validate",
    "schema",
    "run",
    "report",
    "compare",
    "history",
    "record",
    "serve",
    "load",
    "calibrate",
    "models",
    "cleanup",
    "export",
    "worker",
    "cluster",
    "scale",
)


class _Parser(argparse.ArgumentParser):
    """argparse that exits with code 2 and one line, the way every other input error does."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"testbed: error: {message}\n")
        raise SystemExit(EXIT_INPUT)


def build_parser() -> argparse.ArgumentParser:
    from testbed import __version__

    parser = _Parser(
        prog="testbed",
        description="Test and benchmark LLM inference deployments.",
        epilog="Exit codes: 0 ok · 1 a verdict failed · 2 bad input · 3 infrastructure error"
        " · 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"testbed {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"testbed.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns (and exits with) the exit code.

    A reader that closed standard output early (``testbed plan … | head``) ends any command
    quietly with 0 (:mod:`testbed.cli.pipes`)."""
    from testbed.cli import pipes

    before = pipes.stdout_identity()
    try:
        code = _main(argv)
    except BrokenPipeError as exc:
        if not pipes.reader_gone():  # a socket's broken pipe, untranslated: a bug
            return _internal_error(exc)
        pipes.silence()
        return EXIT_OK
    except SystemExit:
        if pipes.gave_up_on_closed_pipe(before):  # rich's console: SystemExit(1) on EPIPE
            return EXIT_OK
        pipes.flush()  # argparse's --help: its text is still buffered
        raise
    # what is still buffered meets a closed pipe here, not in the interpreter's exit; the
    # command had finished, so its own code stands
    pipes.flush()
    return code


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_INPUT
    try:
        code = int(handler(args))
    except TestbedError as exc:
        _print_error(str(exc))
        code = exc.exit_code
    except KeyboardInterrupt:
        _print_error("interrupted")
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # main decides: the reader of standard output left, or a bug
    except Exception as exc:  # a bug of testbed's: exit 3, never 1 (1 means a verdict failed)
        code = _internal_error(exc)
    return code


def _print_error(message: str) -> None:
    sys.stderr.write(f"testbed: error: {message}\n")


def _internal_error(exc: Exception) -> int:
    """One line for the user; the traceback goes to a file for the bug report."""
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile(
        "w", prefix="testbed-crash-", suffix=".txt", delete=False, encoding="utf-8"
    ) as handle:
        traceback.print_exception(exc, file=handle)
    _print_error(
        f"internal error: {type(exc).__name__}: {exc} (a bug in testbed; the traceback is in"
        f" {handle.name})"
    )
    return EXIT_INFRA


def run() -> None:
    """``python -m testbed``."""
    raise SystemExit(main())
