"""Label and field selectors, parsed once per request and matched against object dicts.

Label selectors take the full syntax of ``labels.Parse``: ``k=v``, ``k==v``, ``k!=v``,
``k in (a,b)``, ``k notin (a)``, ``k`` and ``!k``. Field selectors take ``=``, ``==`` and
``!=`` on any dotted path (``metadata.name``, ``status.phase``, ``spec.nodeName``,
``involvedObject.uid`` …); a missing field compares as the empty string, as the server does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubemu.storage.errors import bad_request

Matcher = Callable[[dict[str, Any]], bool]

_SET_TERM = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_TERM = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|!=|=)\s*([A-Za-z0-9._-]*)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    eq = _EQ_TERM.match(term)
    if eq:
        key, op, value = eq.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    st = _SET_TERM.match(term)
    if not st:
        raise bad_request(f"unable to parse requirement: {term.strip()!r}")
    negate, key, op, values = st.groups()
    if op is None:
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    if negate:
        raise bad_request(f"unable to parse requirement: {term.strip()!r}")
    allowed = frozenset(v.strip() for v in values.split(",") if v.strip())
    if op == "in":
        return lambda labels: labels.get(key) in allowed
    return lambda labels: labels.get(key) not in allowed


def label_matcher(text: str | None) -> Matcher | None:
    """A predicate over objects for a label selector, or None when it selects everything."""
    if not text or not text.strip():
        return None
    terms = [_label_term(t) for t in _split_terms(text)]

    def match(obj: dict[str, Any]) -> bool:
        labels = obj["metadata"].get("labels") or {}
        return all(term(labels) for term in terms)

    return match


def field_value(obj: dict[str, Any], path: str) -> str:
    """The value at a dotted path as the server compares it (missing → "")."""
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
        if node is None:
            return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def field_matcher(text: str | None) -> Matcher | None:
    """A predicate for a field selector, or None when it selects everything."""
    if not text or not text.strip():
        return None
    terms: list[tuple[str, bool, str]] = []
    for term in _split_terms(text):
        eq = _EQ_TERM.match(term) or re.match(
            r"^\s*([A-Za-z0-9._-]+)\s*(==|!=|=)\s*(.*?)\s*$", term
        )
        if not eq:
            raise bad_request(f"invalid field selector: {term.strip()!r}")
        path, op, value = eq.groups()
        terms.append((path, op != "!=", value))

    def match(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, path) == value) == want for path, want, value in terms)

    return match


def both(first: Matcher | None, second: Matcher | None) -> Matcher | None:
    if first is None:
        return second
    if second is None:
        return first
    return lambda obj: first(obj) and second(obj)
