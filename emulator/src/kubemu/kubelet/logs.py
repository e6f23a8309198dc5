"""Container logs, kept per container and per run of it (current and previous), on disk.

Each line is stored with the time it was read, as the CRI log format does
(``2026-11-23T20:45:01.123456789Z stdout F text``), so ``timestamps=true`` can show it and
``sinceSeconds`` could filter by it. ``GET …/pods/{name}/log`` reads the current run or,
with ``previous=true``, the one before; ``follow=true`` keeps streaming until the run ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from kubefacts.times import NANOS, now


def _stamp() -> str:
    return now(NANOS)


@dataclass
class RunLog:
    """The output of one run of one container."""

    path: Path
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    grew: asyncio.Event = field(default_factory=asyncio.Event)

    def write(self, text: str, stream: str = "stdout") -> None:
        """Append ``text`` (one or more lines) with the current time."""
        lines = text.splitlines() or [""]
        stamp = _stamp()
        self.path.parent.mkdir(parents=True, exist_ok=True)  # made at the first line only
        with self.path.open("a", encoding="utf-8") as out:
            for line in lines:
                out.write(f"{stamp} {stream} F {line}\n")
        self.grew.set()

    def close(self) -> None:
        self.finished.set()
        self.grew.set()

    def lines(self) -> list[tuple[str, str]]:
        """(timestamp, text) of every line so far."""
        try:
            raw = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []
        return [_split(line) for line in raw]


def _split(line: str) -> tuple[str, str]:
    stamp, _, rest = line.partition(" ")
    parts = rest.split(" ", 2)
    return stamp, parts[2] if len(parts) == 3 else rest


def render(lines: list[tuple[str, str]], timestamps: bool, tail: int | None) -> bytes:
    """The body ``kubectl logs`` expects: text lines, each optionally led by its timestamp."""
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    text = "".join(f"{stamp} {line}\n" if timestamps else f"{line}\n" for stamp, line in lines)
    return text.encode()


@dataclass
class LogBook:
    """Every container's runs, under ``root/<namespace>_<pod>_<uid>/<container>/<n>.log``."""

    root: Path
    runs: dict[tuple[str, str, str], list[RunLog]] = field(default_factory=dict)

    def new_run(self, namespace: str, pod: str, uid: str, container: str) -> RunLog:
        key = (namespace, pod, container)
        runs = self.runs.setdefault(key, [])
        folder = self.root / f"{namespace}_{pod}_{uid}" / container
        run = RunLog(folder / f"{len(runs)}.log")
        runs.append(run)
        return run

    def forget(self, namespace: str, pod: str) -> None:
        """Drop a deleted pod's logs from the index (files stay in the state dir)."""
        for key in [k for k in self.runs if k[:2] == (namespace, pod)]:
            for run in self.runs.pop(key):
                run.close()

    def containers(self, namespace: str, pod: str) -> list[str]:
        return [k[2] for k in self.runs if k[:2] == (namespace, pod)]

    def find(self, namespace: str, pod: str, container: str, previous: bool) -> RunLog | None:
        runs = self.runs.get((namespace, pod, container)) or []
        index = -2 if previous else -1
        return runs[index] if len(runs) >= -index else None


async def follow(run: RunLog, timestamps: bool, tail: int | None) -> AsyncIterator[bytes]:
    """The run's lines so far, then each new line until the run ends."""
    lines = run.lines()
    yield render(lines, timestamps, tail)
    sent = len(lines)
    while True:
        run.grew.clear()
        lines = run.lines()
        if len(lines) > sent:
            yield render(lines[sent:], timestamps, None)
            sent = len(lines)
            continue
        if run.finished.is_set():
            return
        await run.grew.wait()
