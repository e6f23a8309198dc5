"""Stored objects as JSON values: the dict type every layer passes around, its deep copy,
and what a write's checks may read of the store.

The lowest module of the storage: the store, the collector and the controllers all copy
objects the same way, so the copy lives below all of them; admission and the Priority plugin
read the store through :class:`Reader` without importing it.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import orjson

Obj = dict[str, Any]
_T = TypeVar("_T")


def clone(obj: _T) -> _T:
    """A deep copy of a JSON value (faster than ``copy.deepcopy`` for dicts of JSON)."""
    copied: _T = orjson.loads(orjson.dumps(obj))
    return copied


class Reader(Protocol):
    """What a write's checks read of the store they admit into (:class:`.store.Store`)."""

    def try_get(self, key: str, namespace: str | None, name: str) -> Obj | None: ...

    def list(
        self,
        key: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], int]: ...
