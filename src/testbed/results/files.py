"""Writing result files so that a crash at any moment leaves them whole, and reading them back
as whole as they are."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, cast


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: never half-written.
    The file gets the mode of every other file of the folder (0666 less the user's umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _create_temporary(path: Path) -> tuple[int, Path]:
    """A new, empty file beside ``path`` that no one else has opened. Not ``mkstemp``: its
    files are 0600 whatever the umask, and the rename carries that mode to the result — a
    run folder whose summaries only their owner could read beside 0644 records."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):  # a name taken (a crashed writer's leftover) only costs another try
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp  # the kernel applies the umask
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name beside it", str(path))


def create_file(path: Path) -> None:
    """Create ``path`` empty, as any other file of its folder, when it does not exist: for
    files that a library would otherwise create with a mode of its own (SQLite's 0644 less
    the umask, which an umask of 002 makes differ from its neighbours' 0664)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` as indented JSON, atomically."""
    write_atomic(path, json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")


class RecordWriter:
    """Appends records as JSON lines, flushed one by one so a crash loses at most the
    record being written (a torn last line is ignored by :func:`read_records`).
    ``on_write`` sees each record once it is on disk (``testbed worker --stream``)."""

    def __init__(
        self, path: Path, on_write: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self.count = 0
        self._on_write = on_write

    def write(self, record: Mapping[str, Any]) -> None:
        self.write_line(json.dumps(record, separators=(",", ":")), record)

    def write_line(self, line: str, record: Mapping[str, Any]) -> None:
        """Append ``record`` that the caller has already encoded as one JSON line (no newline):
        the load generator encodes its flat records (ints, strings, lists of ints) with
        orjson, about four times cheaper than ``json``."""
        self._file.write(line + "\n")
        self._file.flush()
        self.count += 1
        if self._on_write is not None:
            # a record is a plain dict at run time (its TypedDict is only for mypy)
            self._on_write(cast("dict[str, Any]", record))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_records(path: Path) -> list[dict[str, Any]]:
    """All whole records of a JSON-lines file; a torn last line (a crash mid-write) is skipped."""
    if not path.exists():
        return []
    records = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def read_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``, or {} when there is none (never written, unreadable, or
    not an object)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
