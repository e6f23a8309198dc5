"""The one Jinja environment every template of testbed is rendered in: steps' arguments,
named commands' arguments, stacks' manifests and values, scale workload templates.

A campaign is data, so its templates are too: they read the values they are given and
nothing else. The environment is Jinja's :class:`~jinja2.sandbox.ImmutableSandboxedEnvironment`
(no attribute that starts with ``_`` — ``''.__class__``, ``lipsum.__globals__`` —, no
method that mutates a list or a dict), with :class:`~jinja2.StrictUndefined` (a name the
template is not given is an error, not a blank). On top of Jinja's sandbox:

- ``{% include %}``, ``{% import %}``, ``{% from … import %}`` and ``{% extends %}`` are
  refused when the template is parsed: a template names no other file;
- ``range()`` of more than :data:`MAX_ITEMS` items, ``*`` that would make a text or a list
  longer than :data:`MAX_REPEAT`, ``**`` whose result would pass :data:`MAX_POWER_BITS`
  bits are refused (rendering must end, in bounded memory);
- a lone ``{{ expr }}`` evaluated for its value (:func:`evaluate`) must give data: text, a
  number, a boolean, null, a list or a mapping of those.

Every failure is a :class:`TemplateFailure` (an :class:`InputError`, exit 2) that carries the
line of the template it happened at, so each caller can place it (``file:line``);
:class:`UndefinedName` and :class:`UnsafeTemplate` tell the two common kinds apart.
"""

from __future__ import annotations

import functools
import math
import operator
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from testbed.core.errors import InputError

#: Most items a ``range()`` may make (Jinja's sandbox's own bound).
MAX_ITEMS = 100_000
#: Longest text or list ``*`` may make, in characters or items.
MAX_REPEAT = 100 * MAX_ITEMS
#: Largest integer ``**`` may make, in bits (``2**4096`` is a 1,234-digit number).
MAX_POWER_BITS = 4096
#: Statements that load another template: a campaign's template names no file.
_LOADING = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)
_DATA = (str, int, float, bool, type(None))


class TemplateFailure(InputError):
    """A template that cannot be rendered; ``line`` is the template's line (None: unknown)."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


class UndefinedName(TemplateFailure):
    """The template uses a name (or a key, an attribute) it was not given."""


class UnsafeTemplate(TemplateFailure):
    """The template reaches for what the sandbox refuses: Python's objects, another file,
    an unbounded range, a runaway repetition or power."""


class _LoadingRefused(jinja2.TemplateSyntaxError):
    """``{% include %}`` and its kin, refused when the template is parsed."""


class _OverBound(SecurityError):
    """A range, a repetition or a power past this module's bounds."""


class _Environment(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, bounded, and without the statements that load files."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self) -> None:
        super().__init__(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
        self.globals["range"] = _bounded_range

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        # Jinja's one parsing hook (``parse``, ``compile`` and ``from_string`` all use it):
        # refused here, a loading statement is a syntax error at its own line.
        tree = super()._parse(source, name, filename)
        for node in tree.find_all(_LOADING):
            word = type(node).__name__.lower().replace("fromimport", "from … import")
            raise _LoadingRefused(
                f"{{% {word} %}} is not allowed: a template renders the values it is given"
                " and loads no other file (put the text in the template itself)",
                node.lineno,
                name,
                filename,
            )
        return tree

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "*":
            _check_repeat(left, right)
            return operator.mul(left, right)
        _check_power(left, right)
        try:
            return operator.pow(left, right)
        except OverflowError as exc:
            raise _OverBound(f"{left!r} ** {right!r} is too large a number") from exc


def _bounded_range(*args: int) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_ITEMS:
        raise _OverBound(
            f"range({', '.join(map(str, args))}) makes {len(numbers)} items; a template's"
            f" range() may make at most {MAX_ITEMS}"
        )
    return numbers


def _check_repeat(left: Any, right: Any) -> None:
    for seq, times in ((left, right), (right, left)):
        sized = isinstance(seq, str | list | tuple) and isinstance(times, int)
        if sized and len(seq) * times > MAX_REPEAT:
            raise _OverBound(
                f"* would make {len(seq) * times} characters or items; a template's"
                f" repetitions may make at most {MAX_REPEAT}"
            )


def _check_power(left: Any, right: Any) -> None:
    if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        bits = math.log2(abs(left)) * right
        if bits > MAX_POWER_BITS:
            raise _OverBound(
                f"{left} ** {right} has about {int(bits)} bits; a template's numbers may"
                f" have at most {MAX_POWER_BITS}"
            )


@functools.cache
def environment() -> jinja2.Environment:
    """The environment (one per process: it is immutable, and compiling is what costs)."""
    return _Environment()


@functools.lru_cache(maxsize=256)
def compiled(source: str) -> jinja2.Template:
    """``source`` compiled (cached by text: compiling costs milliseconds, rendering µs).
    Raises :class:`TemplateFailure` for a syntax error or a refused statement."""
    try:
        return environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise _failure(exc, exc.lineno) from None


def render(source: str, names: Mapping[str, Any]) -> str:
    """``source`` rendered with ``names``; :class:`TemplateFailure` at the template's line."""
    template = compiled(source)
    return str(_guarded(lambda: template.render(**names)))


def evaluate(expression: str, names: Mapping[str, Any]) -> Any:
    """The value of one Jinja expression (the inside of a lone ``{{ … }}``), kept as its
    type; it must be data (text, number, boolean, null, list, mapping)."""
    try:
        function = environment().compile_expression(expression, undefined_to_none=False)
    except jinja2.TemplateSyntaxError as exc:
        raise _failure(exc, exc.lineno) from None

    def value() -> Any:
        result = function(**names)
        if isinstance(result, jinja2.Undefined):
            str(result)  # StrictUndefined raises here, naming the missing name
        return result

    return _as_data(_guarded(value), expression)


def _guarded(call: Callable[[], Any]) -> Any:
    # Anything a template's expression raises (1/0, 'a' + 1, a refused attribute) is the
    # template's mistake, not testbed's: exit 2 at its line, never a traceback.
    try:
        return call()
    except Exception as exc:
        raise _failure(exc, _template_line(exc)) from None


def _failure(exc: BaseException, line: int | None) -> TemplateFailure:
    if isinstance(exc, jinja2.UndefinedError):
        return UndefinedName(exc.message or str(exc), line)
    if isinstance(exc, _OverBound):
        return UnsafeTemplate(str(exc), line)
    if isinstance(exc, SecurityError):
        refused = str(exc).rstrip(".")
        return UnsafeTemplate(
            f"{refused} — a template may use the values it is given, not Python's objects", line
        )
    if isinstance(exc, _LoadingRefused):
        return UnsafeTemplate(exc.message or str(exc), line)
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return TemplateFailure(f"template syntax: {exc.message or exc}", line)
    if isinstance(exc, jinja2.TemplateError):
        return TemplateFailure(exc.message or str(exc), line)
    return TemplateFailure(f"{type(exc).__name__}: {exc}", line)


def _template_line(exc: BaseException) -> int | None:
    """The template line Jinja was rendering when it raised (its rewritten traceback has
    a frame per template line, in a file named ``<template>``)."""
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == "<template>":
            line = lineno
    return line


def _as_data(value: Any, expression: str) -> Any:
    """``value`` as plain data (a range or a tuple becomes a list); UnsafeTemplate if it
    is anything else (a function, a class, Jinja's cycler …)."""
    if isinstance(value, _DATA):
        return value
    if isinstance(value, list | tuple | range):
        return [_as_data(item, expression) for item in value]
    if isinstance(value, Mapping):
        return {_as_data(k, expression): _as_data(v, expression) for k, v in value.items()}
    raise UnsafeTemplate(
        f"{{{{{expression}}}}} gives a {type(value).__name__}, not data — a template's value"
        " must be text, a number, true/false, null, a list or a mapping"
    )
