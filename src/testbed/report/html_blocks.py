"""The pieces the HTML report's sections are written in: text escaped with its secrets masked,
key-value lists, parameters, JSON blocks and nested tables.

Every text of the report goes through :func:`e` (:func:`testbed.core.secrets.redact`, then
HTML escaping); the other pieces are built on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from testbed.core.secrets import redact


def e(value: Any) -> str:
    """Text for HTML: secrets masked, escaped."""
    return escape(redact(str(value)))


def pre_json(value: Any) -> str:
    return f"<pre><code>{e(json.dumps(value, indent=2, default=str))}</code></pre>"


def kv(values: Mapping[str, Any]) -> str:
    items = "".join(
        f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in values.items() if v not in (None, "")
    )
    return f'<dl class="kv">{items}</dl>'


def params(params: Mapping[str, Any]) -> str:
    return "<br>".join(f"<code>{e(k)}={e(v)}</code>" for k, v in params.items())


def tree(value: Any, depth: int = 0) -> str:
    """Nested mappings as nested tables; lists of scalars inline; anything else as JSON."""
    if isinstance(value, Mapping) and value and depth < 4:
        cells = "".join(
            f"<tr><th>{e(k)}</th><td>{tree(v, depth + 1)}</td></tr>" for k, v in value.items()
        )
        return f"<table>{cells}</table>"
    if isinstance(value, float):
        return e(f"{value:.6g}")
    if isinstance(value, str | int | bool) or value is None:
        return e(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return e(", ".join(_scalar(v) for v in value)) if len(value) <= 20 else pre_json(value)
    if (
        isinstance(value, list)
        and value
        and depth < 4
        and all(isinstance(v, Mapping) for v in value)
    ):
        return _rows_table(value, depth)
    return pre_json(value)


def _scalar(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _rows_table(rows: Sequence[Mapping[str, Any]], depth: int) -> str:
    """A list of mappings (criteria, failures) as one table, a column per key."""
    columns: dict[str, None] = {}
    for row in rows[:200]:
        columns.update(dict.fromkeys(str(k) for k in row))
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{tree(row.get(c), depth + 1)}</td>" for c in columns) + "</tr>"
        for row in rows[:200]
    )
    more = f'<p class="muted">{len(rows) - 200} more rows</p>' if len(rows) > 200 else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"
