"""Stable ids: a short hash of a canonical JSON form (kubefacts', shared with the emulator),
and readable slugs."""

from __future__ import annotations

import re

from kubefacts import ids as shared

canonical_json = shared.canonical_json
short_hash = shared.short_hash

_SLUG_BAD = re.compile(r"[^a-z0-9.]+")


def slugify(text: str, max_length: int = 60) -> str:
    """Lower-case, ``[a-z0-9.-]`` only, dashes between words, at most ``max_length`` chars."""
    slug = _SLUG_BAD.sub("-", text.lower()).strip("-")
    return slug[:max_length].rstrip("-") or "x"
