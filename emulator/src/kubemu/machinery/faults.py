"""Injected faults: what a pod's annotations or the emulator's ``--fault`` rules ask to break.

Per pod, annotations (values are strings, as annotations are):

- ``emulator.testbed.io/fault``: ``image-pull`` (ErrImagePull, then ImagePullBackOff),
  ``crash`` (the container exits 1 after ``fault-after`` seconds, restarted per
  ``restartPolicy`` into CrashLoopBackOff), ``oom`` (killed as OOMKilled, exit 137, after
  ``fault-after`` seconds), ``slow-schedule`` (bound only after ``schedule-delay`` seconds);
- ``emulator.testbed.io/fault-after``: seconds a crashing container runs first (default 1);
- ``emulator.testbed.io/schedule-delay``: seconds before binding (default 5);
- ``emulator.testbed.io/fault-container``: the one container the fault hits (default: every
  app container; name an init container to break that one instead).

Per emulator run, rules ``SELECTOR=GLOB:KIND[:SECONDS]`` where SELECTOR is ``image``,
``pod`` or ``namespace`` (e.g. ``image=*vllm*:image-pull``, ``pod=canary-*:crash:3``) hit
every pod they match, unless the pod's own annotation says otherwise.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kubefacts.errors import InputError

PREFIX = "emulator.testbed.io/"
FAULT = PREFIX + "fault"
AFTER = PREFIX + "fault-after"
DELAY = PREFIX + "schedule-delay"
CONTAINER = PREFIX + "fault-container"
RUN_SECONDS = PREFIX + "run-seconds"

Kind = Literal["image-pull", "crash", "oom", "slow-schedule"]
KINDS: tuple[Kind, ...] = ("image-pull", "crash", "oom", "slow-schedule")
_SELECTORS = ("image", "pod", "namespace")


@dataclass(frozen=True)
class Fault:
    """One fault on one pod."""

    kind: Kind
    seconds: float
    container: str | None = None

    def hits(self, container: str, init: bool) -> bool:
        if self.kind == "slow-schedule":
            return False
        if self.container is not None:
            return container == self.container
        return not init


@dataclass(frozen=True)
class FaultRule:
    """``SELECTOR=GLOB:KIND[:SECONDS]`` from the command line."""

    selector: str
    pattern: str
    kind: Kind
    seconds: float | None

    @classmethod
    def parse(cls, text: str) -> FaultRule:
        selector, sep, rest = text.partition("=")
        parts = rest.split(":")
        if not sep or selector not in _SELECTORS or len(parts) not in (2, 3):
            raise InputError(
                f"--fault {text!r}: write SELECTOR=GLOB:KIND[:SECONDS] with SELECTOR one of"
                f" {', '.join(_SELECTORS)} and KIND one of {', '.join(KINDS)},"
                " e.g. --fault 'image=*vllm*:image-pull'"
            )
        kind = _kind(parts[1], f"--fault {text!r}")
        seconds = _seconds(parts[2], f"--fault {text!r}") if len(parts) == 3 else None
        return cls(selector, parts[0], kind, seconds)

    def matches(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        if self.selector == "pod":
            return fnmatch.fnmatchcase(str(meta.get("name", "")), self.pattern)
        if self.selector == "namespace":
            return fnmatch.fnmatchcase(str(meta.get("namespace", "")), self.pattern)
        spec = pod.get("spec") or {}
        images = [
            str(c.get("image", ""))
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        ]
        return any(fnmatch.fnmatchcase(image, self.pattern) for image in images)


def fault_of(pod: Mapping[str, Any], rules: Sequence[FaultRule] = ()) -> Fault | None:
    """The fault for ``pod``: its annotation first, then the first matching rule."""
    notes = (pod.get("metadata") or {}).get("annotations") or {}
    name = (pod.get("metadata") or {}).get("name", "?")
    where = f"pod {name!r} annotation"
    if FAULT in notes:
        kind = _kind(str(notes[FAULT]), f"{where} {FAULT}")
        key = DELAY if kind == "slow-schedule" else AFTER
        seconds = _seconds(notes[key], f"{where} {key}") if key in notes else _default(kind)
        return Fault(kind, seconds, notes.get(CONTAINER))
    for rule in rules:
        if rule.matches(pod):
            seconds = rule.seconds if rule.seconds is not None else _default(rule.kind)
            return Fault(rule.kind, seconds, notes.get(CONTAINER))
    return None


def run_seconds(pod: Mapping[str, Any]) -> float | None:
    """``emulator.testbed.io/run-seconds``: how long an unknown image's container runs."""
    notes = (pod.get("metadata") or {}).get("annotations") or {}
    if RUN_SECONDS not in notes:
        return None
    return _seconds(notes[RUN_SECONDS], f"annotation {RUN_SECONDS}")


def _default(kind: Kind) -> float:
    return 5.0 if kind == "slow-schedule" else 1.0


def _kind(text: str, where: str) -> Kind:
    for kind in KINDS:
        if text == kind:
            return kind
    raise InputError(f"{where}: {text!r} is not a fault; use one of {', '.join(KINDS)}")


def _seconds(text: Any, where: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = -1.0
    if value < 0:
        raise InputError(f"{where}: {text!r} is not a number of seconds (e.g. 2.5)")
    return value
