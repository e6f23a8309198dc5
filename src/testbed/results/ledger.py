"""The ledger: one row per treatment, updated atomically as treatments start and finish.

SQLite in WAL mode, one transaction per change: a run killed with SIGKILL at any moment
leaves a ledger that ``--resume`` trusts. Finished treatments (PASS, FAIL, INCONCLUSIVE,
SKIPPED) are kept; ERROR, interrupted (``running``) and never-started ones run again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Self

from testbed.core.clock import wall_label
from testbed.results.files import create_file

FINAL = ("PASS", "FAIL", "INCONCLUSIVE", "SKIPPED")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS treatments (
    id TEXT PRIMARY KEY,
    dir TEXT NOT NULL,
    state TEXT NOT NULL,          -- pending | running | finished
    status TEXT,                  -- the verdict once finished or errored
    reason TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    started TEXT,
    finished TEXT
);
"""


class Ledger:
    """The state of every treatment of one run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        create_file(path)  # the folder's mode, not SQLite's (its journals copy the file's)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def register(self, rows: Iterable[tuple[str, str, str, str]]) -> None:
        """Add treatments (id, dir, initial status, reason) that the ledger does not know yet."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            for tid, dirname, status, reason in rows:
                state = "finished" if status == "SKIPPED" else "pending"
                self._db.execute(
                    "INSERT OR IGNORE INTO treatments (id, dir, state, status, reason)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (tid, dirname, state, status or None, reason),
                )

    def start(self, tid: str) -> int:
        """Mark ``tid`` running; return its attempt number (1 for the first)."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "UPDATE treatments SET state='running', attempts=attempts+1, started=?,"
                " status=NULL, reason=NULL WHERE id=?",
                (wall_label(), tid),
            )
            row = self._db.execute("SELECT attempts FROM treatments WHERE id=?", (tid,)).fetchone()
        return int(row[0])

    def finish(self, tid: str, status: str, reason: str = "") -> None:
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "UPDATE treatments SET state='finished', status=?, reason=?, finished=? WHERE id=?",
                (status, reason, wall_label(), tid),
            )

    def to_run(self) -> set[str]:
        """Treatments a (resumed) run must execute: never finished, or finished in ERROR."""
        rows = self._db.execute(
            "SELECT id FROM treatments WHERE state != 'finished' OR status = 'ERROR'"
        ).fetchall()
        return {r[0] for r in rows}

    def states(self) -> dict[str, tuple[str, str | None, str | None, int]]:
        """id → (state, status, reason, attempts)."""
        rows = self._db.execute("SELECT id, state, status, reason, attempts FROM treatments")
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}
