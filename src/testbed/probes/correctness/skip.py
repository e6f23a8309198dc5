"""Skip rules, evaluated against the treatment's resolved deployment.

``single_shard_only`` skips on a deployment with ``tensor_parallel > 1`` (tgis-tester's rule);
``multi_shard_only`` the opposite. ``when: {dtype: float32}`` skips where every key matches;
``unless:`` skips where one does not. A key is looked up in the deployment's ``params``
first, then at its top level (``server``, ``model``, ``name``); a dotted key
(``resources.gpu``) is a path. A list value matches any of its items.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.probes.correctness.cases import (
    Case,
    EmbeddingCase,
    ShardRule,
    SkipRule,
    UnlessRule,
    WhenRule,
)

_MISSING = object()


def lookup(deployment: Mapping[str, Any], key: str) -> Any:
    """The deployment's value for ``key`` (see the module docstring), or a sentinel."""
    if "." in key:
        node: Any = deployment
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return _MISSING
            node = node[part]
        return node
    params = deployment.get("params")
    if isinstance(params, Mapping) and key in params:
        return params[key]
    return deployment.get(key, _MISSING)


def _matches(deployment: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    for key, wanted in conditions.items():
        value = lookup(deployment, key)
        if value is _MISSING:
            return False
        options = wanted if isinstance(wanted, list) else [wanted]
        if not any(_equal(value, option) for option in options):
            return False
    return True


def _equal(value: Any, option: Any) -> bool:
    # YAML reads `1` and a deployment may hold 1.0; booleans are not numbers here.
    if isinstance(value, bool) or isinstance(option, bool):
        return value is option
    if isinstance(value, int | float) and isinstance(option, int | float):
        return float(value) == float(option)
    return bool(value == option) or str(value) == str(option)


def describe(rule: SkipRule) -> str:
    """The rule as a user wrote it, for the SKIPPED line."""
    if isinstance(rule, ShardRule):
        return rule.rule
    conditions = rule.when if isinstance(rule, WhenRule) else rule.unless
    word = "when" if isinstance(rule, WhenRule) else "unless"
    text = ", ".join(f"{k}: {v}" for k, v in conditions.items())
    return f"{word}: {{{text}}}" + (f" ({rule.reason})" if rule.reason else "")


def applies(rule: SkipRule, deployment: Mapping[str, Any]) -> bool:
    """True when ``rule`` skips the case on ``deployment``."""
    if isinstance(rule, ShardRule):
        shards = lookup(deployment, "tensor_parallel")
        shards = 1 if shards is _MISSING or shards is None else int(shards)
        return shards > 1 if rule.rule == "single_shard_only" else shards <= 1
    if isinstance(rule, WhenRule):
        return _matches(deployment, rule.when)
    assert isinstance(rule, UnlessRule)
    return not _matches(deployment, rule.unless)


def skip_reason(case: Case | EmbeddingCase, deployment: Mapping[str, Any]) -> str | None:
    """Why ``case`` is skipped on ``deployment`` (the first rule that applies), or None."""
    for rule in case.skip:
        if applies(rule, deployment):
            return f"skipped by {describe(rule)}"
    return None
