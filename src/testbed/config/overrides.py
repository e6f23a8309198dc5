"""Dotted-key assignments: presets (TOPSAIL), ``--set`` overrides and deployment ``extends``.

Precedence, lowest first: schema default < campaign file < presets (in the order given,
each applying its ``extends`` first, at their position) < ``--set`` (in order). The last
write wins. A dotted key addresses the campaign document: ``load.concurrency``;
``deployments.params.dtype`` (every deployment); ``deployments.NAME.params.dtype`` or
``deployments.0.params.dtype`` (one). Assignments may only reach fields the schema knows:
the validation that follows rejects anything else, naming the preset or ``--set``.

``testbed serve`` reads its ``--set`` items with the same parser (:func:`settings_from`).
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from testbed.config.provenance import Origin, Path, Provenance
from testbed.config.yamlsource import safe_load
from testbed.core.errors import CampaignError, InputError

ModelT = TypeVar("ModelT", bound=BaseModel)


def targets(data: dict[str, Any], dotted: str) -> list[Path]:
    """Every concrete path that the dotted key ``dotted`` addresses in ``data``."""
    parts = dotted.split(".")
    if not dotted or any(not p for p in parts):
        raise CampaignError(f"'{dotted}' is not a dotted key — write it like load.concurrency")
    return _expand(data, parts, ())


def _expand(node: Any, parts: list[str], prefix: Path) -> list[Path]:
    if not parts:
        return [prefix]
    head, rest = parts[0], parts[1:]
    if isinstance(node, list):
        names = [item.get("name") if isinstance(item, dict) else None for item in node]
        if head in names:
            index = names.index(head)
            return _expand(node[index], rest, (*prefix, index))
        if head.isdigit() and int(head) < len(node):
            return _expand(node[int(head)], rest, (*prefix, int(head)))
        # Neither a name nor an index: the key applies to every element of the list.
        found = [p for i, item in enumerate(node) for p in _expand(item, parts, (*prefix, i))]
        if not found:
            raise CampaignError(f"'{'.'.join(map(str, prefix))}' is an empty list")
        return found
    child = node.get(head) if isinstance(node, dict) else None
    return _expand(child, rest, (*prefix, head))


def assign(data: dict[str, Any], path: Path, value: Any) -> None:
    """Set ``path`` in ``data`` to a copy of ``value``, creating mappings on the way."""
    node: Any = data
    for part in path[:-1]:
        nxt = node[int(part)] if isinstance(node, list) else node.get(part)
        if not isinstance(nxt, dict | list):
            if isinstance(node, list):
                raise CampaignError(f"cannot set below {part} of a list")
            nxt = {}
            node[part] = nxt
        node = nxt
    if isinstance(node, list):
        node[int(path[-1])] = copy.deepcopy(value)
    elif isinstance(node, dict):
        node[path[-1]] = copy.deepcopy(value)
    else:  # pragma: no cover - guarded above
        raise CampaignError(f"cannot set {'.'.join(map(str, path))}")


def set_dotted(
    data: dict[str, Any], dotted: str, value: Any, origin: Origin, prov: Provenance
) -> None:
    """Assign ``value`` to every path ``dotted`` addresses, recording ``origin``."""
    try:
        paths = targets(data, dotted)
    except CampaignError as exc:
        raise CampaignError(f"{origin.describe()}: {exc}") from None
    for path in paths:
        assign(data, path, value)
        prov.set(path, origin)


def parse_set(text: str, example: str = "load.concurrency=8") -> tuple[str, Any]:
    """``a.b.c=VALUE`` → (``a.b.c``, VALUE parsed as YAML); the one ``--set`` parser.

    An :class:`InputError` (exit 2) names the bad item and shows ``example`` as the fix.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise CampaignError(f"--set {text}: expected KEY=VALUE, e.g. --set {example}")
    if any(not part for part in key.split(".")):
        raise CampaignError(f"--set {text}: '{key}' is not a dotted key, e.g. --set {example}")
    value = safe_load(raw, f"--set {text}", " — quote it if it is text") if raw.strip() else ""
    return key, value


def settings_from(
    model: type[ModelT],
    sets: Sequence[str],
    flags: Mapping[str, tuple[str, Any]],
    *,
    what: str,
    example: str,
) -> ModelT:
    """Settings of one server started by hand (``testbed serve``), validated by ``model``.

    Lowest precedence first: the model's defaults < ``--set KEY=VALUE`` items (in order;
    dotted keys reach nested fields) < explicit flags (``flags``: dotted key → (flag, value),
    a value of None meaning "not given"). An :class:`InputError` names every bad item by
    where it came from (``--set KEY`` or the flag) and says what is wrong or known.
    """
    data: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for text in sets:
        key, value = parse_set(text, example)
        assign(data, tuple(key.split(".")), value)
        origin[key] = f"--set {key}"
    for key, (flag, value) in flags.items():
        if value is not None:
            assign(data, tuple(key.split(".")), value)
            origin[key] = flag
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = [str(p) for p in err["loc"]]
            where = origin.get(".".join(loc), f"--set {'.'.join(loc)}" if loc else what)
            problems.append(f"{where}: {_problem(model, loc, err)}")
        raise InputError(f"invalid {what} — " + "; ".join(problems)) from None


def _problem(model: type[BaseModel], loc: list[str], err: Any) -> str:
    """The message of one validation error; for an unknown key, the known ones."""
    if err["type"] != "extra_forbidden":
        return str(err["msg"])
    owner: Any = model
    for part in loc[:-1]:
        is_model = isinstance(owner, type) and issubclass(owner, BaseModel)
        field = owner.model_fields.get(part) if is_model else None
        owner = field.annotation if field else None
    if not (isinstance(owner, type) and issubclass(owner, BaseModel)):
        return "no such setting"
    known = sorted(owner.model_fields)
    hint = difflib.get_close_matches(loc[-1], known, n=1)
    tip = f"did you mean '{hint[0]}'? " if hint else ""
    return f"no such setting — {tip}known: {', '.join(known)}"


def apply_presets(data: dict[str, Any], names: list[str], prov: Provenance, file: str) -> list[str]:
    """Apply the named presets in order; return every preset applied, ``extends`` included."""
    presets = data.get("presets") or {}
    if not isinstance(presets, dict):
        where = _at(prov, ("presets",), file)
        raise CampaignError(f"{where}: presets must be a mapping of name to assignments")
    applied: list[str] = []
    for name in names:
        _apply_one(data, presets, name, [], prov, applied, file)
    return applied


def _apply_one(
    data: dict[str, Any],
    presets: dict[str, Any],
    name: str,
    stack: list[str],
    prov: Provenance,
    applied: list[str],
    file: str,
) -> None:
    if name in stack:
        cycle = " → ".join([*stack[stack.index(name) :], name])
        where = _at(prov, ("presets", name), file)
        raise CampaignError(f"{where}: preset cycle {cycle} — remove one of these extends")
    if name not in presets:
        known = sorted(presets)
        hint = difflib.get_close_matches(name, known, n=1)
        suggestion = f" — did you mean '{hint[0]}'?" if hint else ""
        listing = f" (known: {', '.join(known)})" if known else " (the file defines none)"
        where = f"{file}: preset '{stack[-1]}' extends an" if stack else f"{file}:"
        raise CampaignError(f"{where} unknown preset '{name}'{suggestion}{listing}")
    body = presets[name]
    if not isinstance(body, dict):
        where = _at(prov, ("presets", name), file)
        raise CampaignError(f"{where}: preset '{name}' must be a mapping of dotted keys to values")
    for key, value in body.items():
        if key == "extends":
            parents = value if isinstance(value, list) else [value]
            if value is None:
                parents = []
            for parent in parents:
                _apply_one(data, presets, str(parent), [*stack, name], prov, applied, file)
            continue
        place = prov.keys.get(("presets", name, key))
        origin = Origin(
            f"preset {name}", file, place.line if place else 0, place.column if place else 0
        )
        set_dotted(data, str(key), value, origin, prov)
    applied.append(name)


def resolve_extends(data: dict[str, Any], prov: Provenance, file: str) -> None:
    """Merge each deployment's ``extends`` parent under it (child values win, deeply)."""
    deployments = data.get("deployments")
    if not isinstance(deployments, list):
        return
    by_name = {
        d["name"]: i
        for i, d in enumerate(deployments)
        if isinstance(d, dict) and isinstance(d.get("name"), str)
    }
    done: set[int] = set()

    def resolve(index: int, stack: list[str]) -> None:
        child = deployments[index]
        parent_name = child.get("extends") if isinstance(child, dict) else None
        if index in done or not isinstance(parent_name, str):  # validation reports non-strings
            done.add(index)
            return
        if parent_name in stack:
            where = _at(prov, ("deployments", index, "extends"), file)
            raise CampaignError(
                f"{where}: deployment extends cycle {' → '.join([*stack, parent_name])}"
            )
        if parent_name not in by_name:
            hint = difflib.get_close_matches(str(parent_name), [str(n) for n in by_name], n=1)
            place = prov.nearest(("deployments", index, "extends"))
            where = place.describe() if place else file
            tip = f" — did you mean '{hint[0]}'?" if hint else ""
            raise CampaignError(f"{where}: extends unknown deployment '{parent_name}'{tip}")
        parent_index = by_name[parent_name]
        if parent_index == index:
            where = _at(prov, ("deployments", index, "extends"), file)
            raise CampaignError(f"{where}: deployment '{parent_name}' extends itself — remove it")
        resolve(parent_index, [*stack, str(child.get("name"))])
        parent = {
            k: v for k, v in deployments[parent_index].items() if k not in ("name", "extends")
        }
        deployments[index] = _deep_merge(parent, child)
        prov.copy_tree(("deployments", parent_index), ("deployments", index))
        done.add(index)

    for i in range(len(deployments)):
        resolve(i, [])


def _at(prov: Provenance, path: Path, file: str) -> str:
    """Where the value at ``path`` was written (file:line:col, a preset, a --set)."""
    place = prov.nearest(path)
    return place.describe() if place else file


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged
