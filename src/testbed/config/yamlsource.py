"""Reading a YAML file into plain data, remembering the line and column of every node."""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Any

import yaml

from testbed.config.provenance import Origin, Path, Provenance
from testbed.core.errors import CampaignError


def load_yaml(path: FsPath) -> tuple[Any, Provenance]:
    """Parse ``path``; return its data and the origin of every value and key in it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CampaignError(f"{path}: no such file — check the path") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        raise CampaignError(f"{path}: cannot read it as a YAML text file ({exc})") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, name: str) -> tuple[Any, Provenance]:
    """Parse YAML ``text`` (``name`` labels its origins)."""
    loader = yaml.SafeLoader(text)
    prov = Provenance({}, {})
    try:
        node = loader.get_single_node()
        data = _build(loader, node, (), prov, name) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        started = exc.context_mark if exc.problem_mark and exc.context_mark else None
        context = (
            f" ({exc.context} at line {started.line + 1}, column {started.column + 1})"
            if started
            else ""
        )
        raise CampaignError(
            f"{where}: invalid YAML: {exc.problem or exc.context}{context}"
        ) from None
    except yaml.YAMLError as exc:
        raise CampaignError(f"{name}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, prov


def _origin(name: str, node: yaml.Node) -> Origin:
    return Origin(name, name, node.start_mark.line + 1, node.start_mark.column + 1)


def _build(
    loader: yaml.SafeLoader, node: yaml.Node, path: Path, prov: Provenance, name: str
) -> Any:
    prov.values[path] = _origin(name, node)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # YAML merge keys (<<)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _build(loader, key_node, (), Provenance({}, {}), name)
            if not isinstance(key, str | int | float | bool):
                raise CampaignError(f"{_origin(name, key_node).place()}: a key must be a scalar")
            if key in result:
                raise CampaignError(
                    f"{_origin(name, key_node).place()}: duplicate key '{key}' — keep only one"
                )
            prov.keys[(*path, key)] = _origin(name, key_node)  # type: ignore[arg-type]
            result[key] = _build(loader, value_node, (*path, key), prov, name)  # type: ignore[arg-type]
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            prov.keys[(*path, index)] = _origin(name, item)
            items.append(_build(loader, item, (*path, index), prov, name))
        return items
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, TypeError, OverflowError) as exc:
        where = _origin(name, node).place()
        raise CampaignError(f"{where}: cannot read the value {node.value!r} ({exc})") from None
