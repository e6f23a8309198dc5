"""The worker's stream: a treatment's records, files and summary as JSON lines on stdout.

``testbed worker --stream`` (a probe Job of ``backend.probes: cluster``) writes every record
as it is written to records.jsonl, then the treatment's other files and its summary. The
controller reads them back from the pod's log, where they sit among whatever else the
process prints: a stream line is a JSON object whose ``testbed.stream`` key is the protocol
version, so log noise is never taken for data. Records carry a sequence number: a log
stream that is re-read after a dropped connection skips what it already wrote, and the
summary's record count tells the controller whether anything went missing.

A stream *line* has a ``kind``: ``record`` (its data is one request's record, the line it has
in records.jsonl), ``file`` or ``summary``. These kind names are wire format, not
vocabulary to tidy: a worker image of an older testbed in the cluster speaks them, so they
never change (``docs/layout.md``, Names).

Stream mode owns the process's stdout: the original descriptor is kept for the stream and
file descriptor 1 is pointed at stderr, so nothing else (a library's print, a child
process) can write into the middle of a stream line.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

KEY = "testbed.stream"
VERSION = 1
#: Files of the treatment directory the stream carries besides records and summary
#: (plots, server metrics); bigger ones are left in the pod.
MAX_FILE_BYTES = 8 * 1024 * 1024
_NOT_FILES = {"records.jsonl", "summary.json"}


@dataclass(frozen=True)
class Item:
    """One decoded stream line: ``kind`` is record, file or summary."""

    kind: str
    data: Any
    seq: int = 0


def encode(kind: str, data: Any, seq: int = 0) -> str:
    """One stream line (without the newline)."""
    return json.dumps({KEY: VERSION, "kind": kind, "seq": seq, "data": data}, separators=(",", ":"))


def decode(line: str) -> Item | None:
    """The stream item of a log line, or None for anything else (log noise)."""
    text = line.strip()
    if not text.startswith("{") or KEY not in text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or value.get(KEY) != VERSION:
        return None
    kind = value.get("kind")
    if kind not in ("record", "file", "summary"):
        return None
    return Item(str(kind), value.get("data"), int(value.get("seq") or 0))


class StreamOut:
    """The worker's side: writes stream lines to the process's original stdout."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._seq = 0

    @classmethod
    def take_stdout(cls) -> StreamOut:
        """Keep fd 1 for the stream; everything else that writes to stdout goes to stderr."""
        sys.stdout.flush()
        kept = os.dup(1)
        os.dup2(2, 1)
        return cls(os.fdopen(kept, "w", encoding="utf-8", buffering=1))

    def _line(self, kind: str, data: Any, seq: int = 0) -> None:
        self._out.write(encode(kind, data, seq) + "\n")
        self._out.flush()

    def record(self, record: dict[str, Any]) -> None:
        self._seq += 1
        self._line("record", record, self._seq)

    def files(self, folder: Path) -> None:
        """The treatment directory's other files (plots, metrics), base64, one line each."""
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            relative = path.relative_to(folder)
            if relative.parts[0] in _NOT_FILES or relative.parts[0] == "attempts":
                continue
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            payload = base64.b64encode(path.read_bytes()).decode("ascii")
            self._line("file", {"path": relative.as_posix(), "b64": payload})

    def summary(self, summary: dict[str, Any] | None) -> None:
        self._line("summary", summary)

    def close(self) -> None:
        self._out.close()


def write_file(folder: Path, data: Any) -> Path | None:
    """Write a streamed file into ``folder``; None when its path would leave the folder."""
    if not isinstance(data, dict):
        return None
    relative = Path(str(data.get("path", "")))
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        return None
    target = folder / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(base64.b64decode(str(data.get("b64", ""))))
    return target
