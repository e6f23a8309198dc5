"""Object metadata the server owns: uid, timestamps, generated names, and their validation."""

from __future__ import annotations

import datetime as _dt
import random
import re
import secrets
import time
import uuid
from typing import Any

from kubefacts.limits import TOTAL_ANNOTATION_BYTES, annotations_size, too_long
from kubefacts.times import MICROS, SECONDS, format_time, from_epoch, parse_time

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_GENERATED_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
_MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

#: Kinds whose names must be DNS labels (63 characters, no dots), not subdomains.
LABEL_NAMED = frozenset({"Namespace", "Service"})


_last_second: list[Any] = [-1, ""]


def now() -> str:
    """Wall time as the API writes timestamps (RFC 3339, seconds).

    Formatted once per second: every write stamps a time, and strftime was the largest
    single cost of creating a pod.
    """
    second = int(time.time())
    if second != _last_second[0]:
        stamp = from_epoch(second)
        _last_second[:] = [second, stamp]
    return str(_last_second[1])


def now_micro() -> str:
    """Wall time with microseconds (``MicroTime``: Event ``eventTime``)."""
    return format_time(_dt.datetime.now(_dt.UTC), MICROS)


def normalized_time(value: object, micro: bool) -> object:
    """An RFC 3339 time as the server writes it back (UTC, ``Z``; 6 decimals for MicroTime).

    Clients send offsets (``+00:00``) or fewer decimals; Go re-serialises what it parsed.
    Values that are not times are returned unchanged (validation is not this function's).
    """
    if not isinstance(value, str) or not value:
        return value
    if (_MICRO if micro else _SECONDS).match(value):
        return value  # already as the server writes it
    try:
        parsed = parse_time(value)
    except ValueError:
        return value
    return format_time(parsed, MICROS if micro else SECONDS)


def new_uid() -> str:
    """A random version-4 UUID (uniqueness, not secrecy: ``random`` is 10x faster here)."""
    return str(uuid.UUID(int=random.getrandbits(128), version=4))


def generated_name(prefix: str) -> str:
    """``prefix`` and five random characters, as the server's name generator makes them."""
    suffix = "".join(secrets.choice(_GENERATED_ALPHABET) for _ in range(5))
    return prefix[: 63 - 5] + suffix


def name_errors(kind: str, name: str) -> list[tuple[str, str]]:
    if kind in LABEL_NAMED:
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return [
                (
                    "metadata.name",
                    f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower'
                    " case alphanumeric characters or '-', and must start and end with an"
                    " alphanumeric character",
                )
            ]
        return []
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return [
            (
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower'
                " case alphanumeric characters, '-' or '.', and must start and end with an"
                " alphanumeric character",
            )
        ]
    return []


def _key_errors(where: str, key: str) -> list[tuple[str, str]]:
    prefix, _, name = key.rpartition("/")
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return [(where, f'Invalid value: "{key}": name part must be a valid qualified name')]
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return [(where, f'Invalid value: "{key}": prefix part must be a DNS subdomain')]
    return []


def metadata_errors(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """Labels and annotations as the server validates them (annotations: at most 256 KiB
    of keys and values together, ``ValidateAnnotations``)."""
    errors: list[tuple[str, str]] = []
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return [("metadata.labels", "Invalid value: must be a map of strings")]
    for key, value in labels.items():
        errors += _key_errors("metadata.labels", key)
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errors.append(
                (
                    f"metadata.labels[{key}]",
                    f'Invalid value: "{value}": a valid label value'
                    " must be 63 characters or less, alphanumeric, '-', '_' or '.'",
                )
            )
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        return [*errors, ("metadata.annotations", "Invalid value: must be a map of strings")]
    for key, value in annotations.items():
        errors += _key_errors("metadata.annotations", key)
        if not isinstance(value, str):
            errors.append((f"metadata.annotations[{key}]", "Invalid value: must be a string"))
    if annotations_size(annotations) > TOTAL_ANNOTATION_BYTES:
        errors.append(("metadata.annotations", too_long(TOTAL_ANNOTATION_BYTES)))
    return errors
