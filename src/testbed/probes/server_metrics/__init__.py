"""Server metrics beside the client's records: scraped while a load or A/B probe runs.

``async with sampling(out_dir, endpoints, settings) as session:`` starts the scraping
process of :mod:`.sampler` (one per treatment, whatever the number of load processes),
waits for its first sample of every deployment, and on exit has it take the final samples
and stop — politely, then surely. The samples land in ``server_metrics.jsonl`` of the
treatment as they are taken; :func:`.summary.summarise` turns them and the records into the
``server_metrics`` part of summary.json.

A deployment served by several pods (a stack's metrics Service with replicas) is scraped
pod by pod and its sample is their sum: through the Service, each scrape would read any one
pod's counters. A deployment without a metrics endpoint (``metrics_path`` None) is left
out, and a sampler that cannot start is noted in ``session.problems``: server metrics are
evidence beside the verdict, never a reason for an ERROR.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.clients.endpoint import Endpoint
from testbed.config.server_metrics import ServerMetrics
from testbed.core.secrets import resolve
from testbed.probes.server_metrics.summary import ClientTokens, read_samples, summarise

__all__ = ["SAMPLES_FILE", "Session", "sampling", "summary_of"]

SAMPLES_FILE = "server_metrics.jsonl"
#: API keys of the targets, for the sampler process (JSON list; never in its spec file).
KEYS_ENV = "TESTBED_METRICS_KEYS"
_READY_TIMEOUT_S = 30.0


@dataclass
class Session:
    """What a sampling session did: its file, the deployments scraped, what went wrong."""

    path: Path
    settings: ServerMetrics
    deployments: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    pid: int | None = None  # the sampler process, while it runs

    @property
    def active(self) -> bool:
        return bool(self.deployments)


def _targets(
    endpoints: Mapping[str, Endpoint], session: Session
) -> tuple[list[dict[str, Any]], list[str | None]]:
    targets: list[dict[str, Any]] = []
    keys: list[str | None] = []
    for name, endpoint in endpoints.items():
        if not endpoint.metrics_path:
            session.problems.append(f"{name}: the server has no metrics endpoint")
            continue
        # several URLs: the pods of one deployment, each counting its own (summed)
        base_urls = list(endpoint.metrics_urls) or [endpoint.base_url]
        targets.append({"name": name, "base_urls": base_urls, "path": endpoint.metrics_path})
        keys.append(resolve(endpoint.api_key) if endpoint.api_key else None)
    return targets, keys


@contextlib.asynccontextmanager
async def sampling(
    out_dir: Path, endpoints: Mapping[str, Endpoint], settings: ServerMetrics
) -> AsyncIterator[Session]:
    """Scrape ``endpoints`` (deployment name → endpoint) while the body runs."""
    session = Session(out_dir / SAMPLES_FILE, settings)
    if not settings.enabled:
        yield session
        return
    targets, keys = _targets(endpoints, session)
    if not targets:
        yield session
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_path = out_dir / ".server-metrics.spec.json"
    err_path = out_dir / ".server-metrics.err"
    spec = {"targets": targets, "interval_s": settings.interval_s, "out": str(session.path)}
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    env = dict(os.environ)
    if any(keys):
        env[KEYS_ENV] = json.dumps(keys)
    with err_path.open("wb") as err:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "testbed.probes.server_metrics.sampler",
            str(spec_path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=env,
        )
    session.pid = child.pid
    try:
        if await _ready(child):
            session.deployments = [t["name"] for t in targets]
        else:
            session.problems.append(f"the metrics sampler did not start: {_tail(err_path)}")
        yield session
    except BaseException:  # cancelled or interrupted: no final samples, stop it now
        await _stop(child, None)
        raise
    else:
        await _stop(child, settings.interval_s)
    finally:
        spec_path.unlink(missing_ok=True)
        if err_path.exists() and not err_path.stat().st_size:
            err_path.unlink()


async def _ready(child: asyncio.subprocess.Process) -> bool:
    assert child.stdout is not None
    try:
        async with asyncio.timeout(_READY_TIMEOUT_S):
            line = await child.stdout.readline()
    except TimeoutError:
        return False
    return line.strip() == b"ready"


async def _stop(child: asyncio.subprocess.Process, interval_s: float | None) -> None:
    """Ask for the final samples (``interval_s`` given) and wait; then terminate, then
    kill, a sampler that does not finish."""
    if interval_s is not None and child.returncode is None and child.stdin is not None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            child.stdin.write(b"stop\n")
            await child.stdin.drain()
    # the settling scrapes take about a second, plus a scrape timeout each at worst
    graces = ((None, 15.0 + interval_s),) if interval_s is not None else ()
    for signal, grace in (*graces, ("terminate", 3.0), ("kill", 10.0)):
        if child.returncode is not None:
            return
        if signal is not None:
            with contextlib.suppress(ProcessLookupError):
                getattr(child, signal)()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await child.wait()


def _tail(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return text.strip()[-600:] or "(no output)"


def summary_of(
    session: Session, clients: Mapping[str, ClientTokens], window: tuple[int, int] | None
) -> dict[str, Any]:
    """The ``server_metrics`` part of summary.json for a finished session."""
    if not session.settings.enabled:
        return {"enabled": False}
    samples = read_samples(session.path) if session.active else []
    return summarise(samples, clients, session.settings, window, session.problems)
