"""Stable ids: a short hash of a canonical JSON form, and readable slugs."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

_SLUG_BAD = re.compile(r"[^a-z0-9.]+")


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def short_hash(value: Any, length: int = 10) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def slugify(text: str, max_length: int = 60) -> str:
    """Lower-case, ``[a-z0-9.-]`` only, dashes between words, at most ``max_length`` chars."""
    slug = _SLUG_BAD.sub("-", text.lower()).strip("-")
    return slug[:max_length].rstrip("-") or "x"
