"""Suite-wide test support: ``async def`` tests run in a fresh event loop each; the real
model servers are shared by the session (tests/fixtures/servers.py)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

pytest_plugins = [
    "tests.fixtures.servers",
    "tests.fixtures.cluster",
    "tests.fixtures.s3",
    "tests.fixtures.misbehaving",
    "tests.fixtures.prometheus",
]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run coroutine tests with ``asyncio.run`` (no plugin needed, one loop per test)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True
