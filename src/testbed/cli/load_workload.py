"""``testbed load``'s flags for multi-turn sessions and trace replay (the ``load:`` section's
``dataset: {kind: sessions}`` and ``{kind: trace}``, docs/load.md).

``--sessions N`` generates N sessions (``--turns``, ``--input-tokens``/``--output-tokens``
per turn, ``--think-time``); ``--dataset FILE --dataset-format sessions`` takes every turn
of a ShareGPT file's conversations; ``--session-unit`` says what ``--concurrency`` and
``--rate`` count. ``--trace FILE`` replays a trace at its offsets (``--profile trace`` is
implied), sped up by ``--trace-speed``, cut by ``--trace-start``/``--trace-end``, looped
with ``--trace-loop``.
"""

from __future__ import annotations

import argparse
from typing import Any

from testbed.core.errors import InputError


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sessions", type=int, help="generated multi-turn sessions")
    p.add_argument("--turns", type=int, help="turns per generated session")
    p.add_argument("--think-time", type=float, help="seconds between an answer and the next turn")
    p.add_argument(
        "--session-unit",
        choices=("sessions", "turns"),
        help="what --concurrency and --rate count (default sessions)",
    )
    p.add_argument("--trace", metavar="FILE", help="replay a timestamped trace at its offsets")
    p.add_argument("--trace-format", choices=("mooncake", "jsonl", "csv"), default="mooncake")
    p.add_argument("--trace-speed", type=float, help="time scaling: 2 replays twice as fast")
    p.add_argument("--trace-start", type=float, help="window: from this trace time, s")
    p.add_argument("--trace-end", type=float, help="window: up to this trace time, s")
    p.add_argument("--trace-loop", action="store_true", help="loop the window")


def dataset(args: argparse.Namespace) -> dict[str, Any] | None:
    """The sessions or trace dataset the flags describe, or None for a plain one."""
    if args.trace:
        if args.dataset or args.sessions:
            raise InputError("--trace replays its own prompts: drop --dataset and --sessions")
        trace: dict[str, Any] = {"kind": "trace", "path": args.trace, "format": args.trace_format}
        for flag, key in (
            ("trace_speed", "speed"),
            ("trace_start", "start_s"),
            ("trace_end", "end_s"),
        ):
            if getattr(args, flag) is not None:
                trace[key] = getattr(args, flag)
        if args.trace_loop:
            trace["loop"] = True
        return trace
    if args.sessions is None and args.dataset_format != "sessions":
        if any(v is not None for v in (args.turns, args.think_time, args.session_unit)):
            raise InputError("--turns, --think-time and --session-unit need --sessions N")
        return None
    out: dict[str, Any] = {"kind": "sessions"}
    if args.dataset_format == "sessions":
        if not args.dataset:
            raise InputError("--dataset-format sessions needs --dataset FILE (ShareGPT)")
        out["path"] = args.dataset
    keys = {
        "sessions": "sessions",
        "turns": "turns",
        "think_time": "think_time_s",
        "session_unit": "unit",
        "input_tokens": "input_tokens",
        "output_tokens": "output_tokens",
    }
    out.update(
        {key: getattr(args, flag) for flag, key in keys.items() if getattr(args, flag) is not None}
    )
    return out
