"""Stop requests of a run (Ctrl-C, SIGTERM), and a final cleanup they cannot skip.

The first request cancels the run: the running treatments and steps stop. What the run
made is then removed all the same — the final cleanup's removal is not optional, and the
first request never cuts it short (one that comes during the final cleanup's steps ends
those steps, then the removal runs). Only a second request cuts the removal short; the run
then says exactly what remains and how to remove it (``testbed cleanup DIR``).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from testbed.core.processes import running_groups
from testbed.execution.events import Observer
from testbed.results.rundir import PID_DIR

T = TypeVar("T")
#: The signals that ask a run to stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class CutShort(Exception):
    """A second stop request cut the final cleanup's removal short."""


@dataclass
class StopRequests:
    """The stop requests a run received, and the one rule of what each does."""

    task: asyncio.Task[object]
    observer: Observer
    received: list[int] = field(default_factory=list)
    removing: bool = False  # the final cleanup is removing what the run made

    @property
    def name(self) -> str:
        return signal.Signals(self.received[0]).name if self.received else ""

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self.on_signal, signum)

    def remove(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)

    def on_signal(self, signum: int) -> None:
        self.received.append(signum)
        if self.removing and len(self.received) == 1:
            name = signal.Signals(signum).name
            self.observer.phase(
                "final cleanup",
                f"{name}: finishing the removal of what the run made first; {name} again"
                " cuts it short",
            )
            return
        self.task.cancel()

    async def removal(self, work: Awaitable[T]) -> T:
        """``work`` (the removal) run to its end unless a second request comes: then it is
        cancelled and :class:`CutShort` raised. The first request is already spent on the
        run, or is only noted (:meth:`on_signal`)."""
        self.removing = True
        running = asyncio.ensure_future(work)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            if len(self.received) < 2:
                raise  # not a stop request of ours: whoever cancelled decides
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            raise CutShort from None
        finally:
            self.removing = False


def cut_short_message(
    name: str, run_dir: Path, steps_done: bool, remains: list[str], resumable: bool
) -> str:
    """What a cut-short final cleanup left, and the commands that finish the job."""
    left = [] if steps_done else ["the final cleanup steps"]
    left += remains
    left += [f"process group {g}" for g in running_groups(run_dir / PID_DIR)]
    what = "; ".join(left) if left else "what the run made (it may be gone already)"
    message = (
        f"{name} again: the final cleanup was cut short — left: {what}. Remove it with"
        f" `testbed cleanup {run_dir}`"
    )
    if resumable:
        message += f", then finish the run with `testbed run --resume {run_dir}`"
    return message
