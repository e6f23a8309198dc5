"""Where every value of a campaign came from: default, file and line, preset, or ``--set``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Origin:
    """One source of a value. ``line``/``column`` are 1-based; 0 when there is no file place."""

    source: str  # a file path, "preset NAME", or "--set"
    file: str = ""
    line: int = 0
    column: int = 0
    detail: str = ""  # e.g. the --set argument as typed

    def place(self) -> str:
        """``file:line:col`` where there is one, else the source."""
        if self.file and self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file or self.source

    def describe(self) -> str:
        """A phrase for messages and ``--explain``."""
        if self.source.startswith("preset "):
            return f"{self.source} ({self.place()})"
        if self.source == "--set":
            return f"--set {self.detail}"
        return self.place()


@dataclass
class Provenance:
    """Origins of values (where the value starts) and of keys (where the key is written),
    by path into the campaign document."""

    values: dict[Path, Origin]
    keys: dict[Path, Origin]

    def set(self, path: Path, origin: Origin) -> None:
        """``path`` was assigned from ``origin``: it and everything below it now come from it."""
        for table in (self.values, self.keys):
            for old in [p for p in table if p[: len(path)] == path]:
                del table[old]
        self.values[path] = origin
        self.keys[path] = origin

    def copy_tree(self, source: Path, target: Path, skip: Iterable[Path] = ()) -> None:
        """Origins under ``source`` also describe the same values under ``target``."""
        skipped = tuple(skip)
        for table in (self.values, self.keys):
            for path, origin in list(table.items()):
                if path[: len(source)] == source:
                    new = target + path[len(source) :]
                    if new not in table and not any(new[: len(s)] == s for s in skipped):
                        table[new] = origin

    def nearest(self, path: Path, *, key: bool = False) -> Origin | None:
        """The origin of ``path`` or of its closest ancestor that has one."""
        table = self.keys if key else self.values
        for end in range(len(path), -1, -1):
            found = table.get(path[:end])
            if found is not None:
                return found
        return None
