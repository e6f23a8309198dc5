"""Turning pydantic's validation errors into messages a user can act on.

Each message names the place (file:line:col, or the preset / ``--set`` that wrote the value),
the field path, what was expected, and a suggestion where one exists.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any

from pydantic import BaseModel, Tag, ValidationError
from pydantic_core import PydanticCustomError

from testbed.config.provenance import Path, Provenance
from testbed.config.server_kinds import KINDS

#: The error type of :func:`located` problems.
LOCATED = "located"


def located(message: str, *at: str | int) -> PydanticCustomError:
    """A validation problem found by a model's cross-field rule, placed at the field ``at``
    (relative to the model) so that the message points at that field's line."""
    return PydanticCustomError(LOCATED, "{message}", {"message": message, "at": at})


def describe_errors(
    exc: ValidationError, data: Any, prov: Provenance, root: type[BaseModel], file: str
) -> str:
    """One message: a line per problem, the first line the most useful."""
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        if error["type"] == LOCATED:
            loc = (*loc, *error["ctx"]["at"])
        path = data_path(loc, data)
        unknown = error["type"] == "extra_forbidden"
        if error["type"] == "union_tag_invalid":
            path = (*path, str(error["ctx"]["discriminator"]).strip("'"))
            unknown = True
        # A problem of the whole document is placed at its start (the root's origin).
        origin = prov.nearest(path, key=unknown) or prov.nearest(path)
        where = origin.describe() if origin else file
        field = dotted(path) or "(top level)"
        lines.append(
            f"{where}: {field}: {_explain(error, loc, path, root)}{_overrides(prov, path)}"
        )
    return "\n".join(dict.fromkeys(lines))


def _overrides(prov: Provenance, path: Path) -> str:
    """For an error about a whole object: the presets and --set that changed it."""
    found = sorted(
        {
            o.describe()
            for p, o in prov.values.items()
            if p[: len(path)] == path and len(p) > len(path) and o.source != o.file
        }
    )
    return f" (changed by {', '.join(found)})" if found else ""


def data_path(loc: tuple[Any, ...], data: Any) -> Path:
    """The path into the document for pydantic's ``loc``, dropping union tags and validator
    names that pydantic inserts and the document does not have."""
    path: list[str | int] = []
    node = data
    for part in loc:
        inside_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if isinstance(node, dict) and part in (node.get("server"), node.get("kind")):
            continue  # the union's tag (``server: manifests`` also has a manifests: field)
        if (isinstance(node, dict) and part in node) or inside_list:
            path.append(part)
            node = node[part]
        elif (
            isinstance(node, dict)
            and isinstance(part, str)
            and part == loc[-1]
            and not _looks_like_tag(part)
        ):
            # A missing field (kept); union tags and validator names are skipped.
            path.append(part)
    return tuple(path)


def _looks_like_tag(part: str) -> bool:
    return (
        "[" in part
        or part in KINDS
        or part
        in {
            "local",
            "kubernetes",
            "synthetic",
            "file",
        }
    )


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _explain(error: Any, loc: tuple[Any, ...], path: Path, root: type[BaseModel]) -> str:
    kind, msg, given = str(error["type"]), str(error["msg"]), error.get("input")
    if kind == "extra_forbidden":
        name = str(path[-1]) if path else str(loc[-1])
        known = field_names(root, loc[:-1])
        hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        tip = f" — did you mean '{hint[0]}'?" if hint else ""
        listing = f" (known fields: {', '.join(known)})" if known and not hint else ""
        return f"unknown field '{name}'{tip}{listing}"
    if kind == "missing":
        return "required field is missing — add it"
    if kind == "union_tag_invalid":
        expected = re.findall(r"'([^']*)'", str(error["ctx"]["expected_tags"]))
        given = error["ctx"]["tag"]
        hint = difflib.get_close_matches(str(given), expected, n=1)
        tip = f" — did you mean '{hint[0]}'?" if hint else ""
        return f"{given!r} is not allowed; expected one of {', '.join(expected)}{tip}"
    if kind == "union_tag_not_found":
        field = str(error["ctx"]["discriminator"]).strip("'")
        return f"`{field}:` is missing — add it"
    if kind in {"literal_error", "enum"}:
        expected = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        hint = difflib.get_close_matches(str(given), expected, n=1) if expected else []
        tip = f" — did you mean '{hint[0]}'?" if hint else ""
        return f"{given!r} is not allowed; expected one of {', '.join(expected)}{tip}"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == LOCATED:
        return msg
    return f"{msg.removeprefix('Input should be ').replace('Input', 'value')}" + (
        f", got {given!r}" if not isinstance(given, dict | list) else ""
    )


def field_names(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The fields of the model reached by following ``loc`` from ``root``."""
    tp: Any = root
    for part in loc:
        tp = _descend(tp, part)
        if tp is None:
            return []
    models = [m for m in _variants(tp) if isinstance(m, type) and issubclass(m, BaseModel)]
    return sorted({name for m in models for name in m.model_fields}) if len(models) == 1 else []


def _variants(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _variants(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [v for arg in typing.get_args(tp) for v in _variants(arg) if v is not type(None)]
    return [tp]


def _tag_variants(tp: Any) -> list[tuple[str, Any]]:
    """(tag, variant) of each ``Annotated[variant, Tag(tag)]`` in the union ``tp``."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(tp)
        tags = [m.tag for m in meta if isinstance(m, Tag)]
        return [(tags[0], base)] if tags else _tag_variants(base)
    if origin in (typing.Union, types.UnionType):
        return [pair for arg in typing.get_args(tp) for pair in _tag_variants(arg)]
    return []


def _descend(tp: Any, part: Any) -> Any:
    for variant in _variants(tp):
        origin = typing.get_origin(variant)
        if isinstance(variant, type) and issubclass(variant, BaseModel):
            if isinstance(part, str) and part in variant.model_fields:
                return variant.model_fields[part].annotation
            tagged = _tagged(tp, part)
            if tagged is not None:
                return tagged
        elif origin is list and isinstance(part, int):
            return typing.get_args(variant)[0]
        elif origin is dict:
            return typing.get_args(variant)[1]
    return None


def _tagged(tp: Any, tag: Any) -> Any:
    """The variant of a discriminated union whose tag is ``tag``: a ``Tag`` beside it (a
    callable discriminator's) or its literal ``server``/``kind`` field."""
    for named, variant in _tag_variants(tp):
        if named == tag:
            return variant
    for variant in _variants(tp):
        if not (isinstance(variant, type) and issubclass(variant, BaseModel)):
            continue
        for field in ("server", "kind"):
            info = variant.model_fields.get(field)
            if info is not None and tag in typing.get_args(info.annotation):
                return variant
    return None
