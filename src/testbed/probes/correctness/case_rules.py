"""What every kind of case says alike: the refusal it expects, its skip rules, and the
shorthands its ``evaluate:`` and ``skip:`` lists accept.

A generation case (:mod:`.cases`) and an embeddings case (:mod:`.embedding_cases`) differ in
their request and their answer; these parts are written once and shared by both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from testbed.config.deployments import Strict


class ExpectedError(Strict):
    """The server must refuse the request."""

    status: int | None = Field(None, ge=100, le=599, description="HTTP status")
    message: str | None = Field(None, description="contained in the error message (any case)")
    match: str | None = Field(None, description="regular expression searched in the message")


class ShardRule(Strict):
    rule: Literal["single_shard_only", "multi_shard_only"]


class WhenRule(Strict):
    """Skip when every key matches the deployment (a list of values matches any of them).
    Keys are deployment params (``dtype``), top-level fields (``server``) or dotted paths."""

    when: dict[str, Any] = Field(min_length=1)
    reason: str = ""


class UnlessRule(Strict):
    """Skip unless every key matches the deployment."""

    unless: dict[str, Any] = Field(min_length=1)
    reason: str = ""


SkipRule = ShardRule | WhenRule | UnlessRule


def skip_shorthand(value: Any) -> Any:
    """``skip: single_shard_only`` → [{rule: single_shard_only}]; a mapping → a list of one."""
    if isinstance(value, str | dict):
        value = [value]
    if isinstance(value, list):
        return [{"rule": v} if isinstance(v, str) else v for v in value]
    return value


def evaluators_shorthand(value: Any, short_fields: Mapping[str, str]) -> Any:
    """An ``evaluate:`` list with its shorthands expanded: ``approx`` → {kind: approx};
    ``{contains: Paris}`` → {kind: contains, text: Paris}, the option going to the field
    ``short_fields`` names for the kind; one evaluator alone → a list of one."""
    if isinstance(value, str | dict):
        value = [value]
    if not isinstance(value, list):
        return value
    return [_one_evaluator(v, short_fields) for v in value]


def _one_evaluator(value: Any, short_fields: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return {"kind": value}
    if isinstance(value, dict) and len(value) == 1 and "kind" not in value:
        ((kind, options),) = value.items()
        if isinstance(options, dict):
            return {"kind": kind, **options}
        if options is None or options is True:
            return {"kind": kind}
        return {"kind": kind, short_fields.get(str(kind), "value"): options}
    return value
