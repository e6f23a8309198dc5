"""Stored objects as JSON values: the dict type every layer passes around, and its deep copy.

The lowest module of the storage: the store, the collector and the controllers all copy
objects the same way, so the copy lives below all of them.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson

Obj = dict[str, Any]
_T = TypeVar("_T")


def clone(obj: _T) -> _T:
    """A deep copy of a JSON value (faster than ``copy.deepcopy`` for dicts of JSON)."""
    copied: _T = orjson.loads(orjson.dumps(obj))
    return copied
