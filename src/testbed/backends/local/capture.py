"""The local backend's state, as ``ps`` and ``tail`` would show it: every live process of each
worker's process group (from ``/proc``) and the end of each worker's server log.

``processes.txt`` has one table (``WORKER PID PPID STAT RSS(KiB) ELAPSED(s) COMMAND``);
``logs/<worker>.log`` holds the last :data:`LOG_BYTES` of its ``server.log``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path

from kubefacts.process_group import group_alive, group_members

LOG_BYTES = 256 * 1024
_HEADER = ("WORKER", "PID", "PPID", "STAT", "RSS(KiB)", "ELAPSED(s)", "COMMAND")


def capture(
    run_dir: Path, pid_dir: Path, folder: Path, workers: Collection[str] | None
) -> list[str]:
    """Write ``processes.txt`` and ``logs/`` for the workers recorded in ``pid_dir``."""
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, ...]] = []
    notes = []
    for pid_file in sorted(pid_dir.glob("*.json")):
        worker = pid_file.stem
        if worker.startswith("step-") or (workers is not None and worker not in workers):
            continue
        try:
            pgid = int(json.loads(pid_file.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            continue
        found = [(worker, *p) for p in _group(pgid)] if group_alive(pgid) else []
        rows += found
        notes.append(f"{worker}: {len(found)} process(es) in group {pgid}")
    for worker_dir in sorted((run_dir / "workers").glob("*")):
        if workers is not None and worker_dir.name not in workers:
            continue
        log = worker_dir / "server.log"
        if log.is_file():
            (folder / "logs").mkdir(exist_ok=True)
            (folder / "logs" / f"{worker_dir.name}.log").write_bytes(_tail(log))
    (folder / "processes.txt").write_text(_table([_HEADER, *rows]))
    return notes or ["no worker process is running"]


def _group(pgid: int) -> list[tuple[str, ...]]:
    """``(pid, ppid, state, rss KiB, elapsed s, command line)`` of group ``pgid``'s processes."""
    ticks, page_kib = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE") // 1024
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError):
        uptime = 0.0
    found = []
    for proc, fields in group_members(pgid):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            rss = int((proc / "statm").read_text().split()[1]) * page_kib
            elapsed = max(0.0, uptime - int(fields[19]) / ticks)
        except (OSError, IndexError, ValueError):
            continue
        command = " ".join(a.decode(errors="replace") for a in argv if a)
        found.append((proc.name, fields[1], fields[0], str(rss), f"{elapsed:.0f}", command))
    return sorted(found, key=lambda row: int(row[0]))


def _tail(path: Path) -> bytes:
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - LOG_BYTES))
        return handle.read()


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "".join(
        "   ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + f"   {r[-1]}\n"
        for r in rows
    )
