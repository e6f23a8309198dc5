"""``${env:NAME}`` references for tokens and keys.

A campaign keeps the reference, never the value. :func:`resolve` reads the environment at
the moment a value is needed (an HTTP header, a boto3 client); :func:`redact` is what
every plan, log and artifact shows instead.
"""

from __future__ import annotations

import os
import re

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
