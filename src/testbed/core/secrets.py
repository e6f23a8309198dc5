"""``${env:NAME}`` references for tokens and keys.

A campaign keeps the reference, never the value. :func:`resolve` reads the environment at
the moment a value is needed (an HTTP header, a boto3 client); :func:`redact` is what
every plan, log and artifact shows instead. Where a value may come back — a child that
was given it echoes it in its output — :func:`values` names what was revealed and
:func:`mask` hides each occurrence: a secret is masked because it is a secret, whatever its
length (a one-character secret masks that character everywhere in the text).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from testbed.core.errors import InputError

_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
MASK = "***"


def is_reference(text: str) -> bool:
    """Whether ``text`` contains at least one ``${env:NAME}`` reference."""
    return bool(_REF.search(text))


def names(text: str) -> list[str]:
    """The variable names ``text`` references, in order of first appearance."""
    return list(dict.fromkeys(_REF.findall(text)))


def resolve(text: str) -> str:
    """Replace every ``${env:NAME}`` in ``text`` by the variable's value."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise InputError(
                f"environment variable {name} is not set (referenced as ${{env:{name}}});"
                f" export {name}=… before running"
            )
        return os.environ[name]

    return _REF.sub(value, text)


def redact(text: str) -> str:
    """``text`` with every ``${env:NAME}`` reference shown as ``***``."""
    return _REF.sub(MASK, text)


def values(texts: Iterable[str]) -> list[str]:
    """The values the ``${env:NAME}`` references of ``texts`` resolve to now (the set,
    non-empty ones), longest first: what :func:`mask` hides."""
    found = {os.environ.get(name, "") for text in texts for name in names(text)}
    return sorted((value for value in found if value), key=len, reverse=True)


def mask(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``secrets`` (values, longest first, as
    :func:`values` orders them) and every ``${env:NAME}`` reference shown as ``***``."""
    for secret in secrets:
        if secret:  # an empty value would put a mask between every two characters
            text = text.replace(secret, MASK)
    return redact(text)
