"""testbed's reference server: plain transformers on the CPU, the yardstick for the others.

The only package of testbed that imports torch and transformers (import-linter checks it),
and only lazily: importing this package is cheap, the stacks load when a server starts or a
model is converted.
"""

from __future__ import annotations

import argparse


def serve_main(args: argparse.Namespace) -> int:
    """``testbed serve hf``: load the model, serve until SIGTERM or Ctrl-C; the exit code."""
    from testbed.servers.reference.server import serve_main as run

    return run(args)


__all__ = ["serve_main"]
