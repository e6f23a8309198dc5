"""RFC 3339 times as the Kubernetes API writes and reads them.

The API writes UTC with a ``Z``: whole seconds for ``Time`` (``creationTimestamp``),
microseconds for ``MicroTime`` (an Event's ``eventTime``), nanoseconds in container log
lines (``kubectl logs --timestamps``). Clients may send offsets (``+00:00``) or fewer
decimals; a time without a zone is read as UTC. Ages are shown as kubectl shows them
(:func:`human_age`).
"""

from __future__ import annotations

import datetime as _dt

#: Decimal places of the second: ``Time``, milliseconds, ``MicroTime``, log lines.
SECONDS, MILLIS, MICROS, NANOS = 0, 3, 6, 9


def format_time(when: _dt.datetime, digits: int = SECONDS) -> str:
    """``when`` in UTC as ``2026-11-21T10:15:00Z`` with ``digits`` (0, 3, 6 or 9) decimals."""
    if when.tzinfo is not None:
        when = when.astimezone(_dt.UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if digits:
        text += "." + f"{when.microsecond:06d}000"[:digits]
    return text + "Z"


def now(digits: int = SECONDS) -> str:
    """The wall time now (a label, never an interval), formatted as :func:`format_time`."""
    return format_time(_dt.datetime.now(_dt.UTC), digits)


def from_epoch(seconds: float, digits: int = SECONDS) -> str:
    """Seconds since the epoch as an RFC 3339 time."""
    return format_time(_dt.datetime.fromtimestamp(seconds, _dt.UTC), digits)


def parse_time(text: str) -> _dt.datetime:
    """An RFC 3339 time as an aware UTC datetime; ValueError when ``text`` is not one."""
    parsed = _dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.UTC)
    return parsed.astimezone(_dt.UTC)


def seconds_since(stamp: object, now: _dt.datetime | None = None) -> float:
    """Seconds from ``stamp`` to ``now`` (default: the wall time); 0.0 when it is no time."""
    try:
        then = parse_time(str(stamp or ""))
    except ValueError:
        return 0.0
    return ((now or _dt.datetime.now(_dt.UTC)) - then).total_seconds()


def human_age(timestamp: str | None, now: _dt.datetime | None = None) -> str:
    """kubectl's ``HumanDuration`` of the time since ``timestamp`` (its AGE column): "<unknown>"
    without one; ``now`` defaults to the wall time now."""
    if not timestamp:
        return "<unknown>"
    when = parse_time(timestamp)
    seconds = int(((now or _dt.datetime.now(_dt.UTC)) - when).total_seconds())
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d" if days < 365 * 8 else f"{days // 365}y"
