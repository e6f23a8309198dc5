"""What a step costs testbed: the time from one trivial step's start to the next's, run by
the step runner itself (no campaign, no server), sequential and in parallel groups.

Runs STEPS ``true`` commands one after the other, then in parallel groups of WIDTH, each in
its own numbered folder with its step.json, stdout/stderr files and pid file — exactly what
a run does — and prints the wall time per step (median of REPEAT rounds). A step's own
work adds to this; the figure is testbed's bookkeeping (process group, files, the polite
stop that reaps what the step left).

    .venv/bin/python bench/steps_overhead.py [--steps 50] [--width 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from testbed.config.templating import PlannedStep
from testbed.execution.events import Silent
from testbed.execution.steps.runner import StepRunner


def steps(count: int, width: int) -> list[PlannedStep]:
    return [
        PlannedStep(i + 1, "prepare", "prepare", i // width, f"s{i}", "run", argv=("true",))
        for i in range(count)
    ]


async def one_round(count: int, width: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        runner = StepRunner(Path(folder), Path(folder), Silent())
        started = time.perf_counter()
        assert await runner.run_stage(steps(count, width), "prepare")
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--width", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for label, width in (("sequential", 1), (f"parallel groups of {args.width}", args.width)):
        rounds = [asyncio.run(one_round(args.steps, width)) for _ in range(args.repeat)]
        wall = statistics.median(rounds)
        print(
            f"{label:>24}: {args.steps} steps in {wall:.2f} s —"
            f" {1000 * wall / args.steps:.1f} ms per step (median of {args.repeat})"
        )


if __name__ == "__main__":
    main()
