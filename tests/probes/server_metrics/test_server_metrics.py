"""Server metrics scraped beside the client's records: the sampler process, the summary,
the mismatch flag, and what the report and the terminal show of them.

End-to-end cases run the load and A/B probes against the simulator, whose counters are
exact: its token counts equal the client's to the token, so a difference is a bug.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.endpoint import Endpoint
from testbed.config.ab import AbProbe
from testbed.config.load import LoadProbe
from testbed.config.server_metrics import ServerMetrics
from testbed.config.sim import SimParams
from testbed.probes import ab, load
from testbed.probes.base import ProbeContext, ProbeOutcome
from testbed.probes.server_metrics import SAMPLES_FILE, sampling
from testbed.probes.server_metrics.summary import (
    ClientTokens,
    headline,
    load_client_tokens,
    read_samples,
    summarise,
)
from testbed.report.server_metrics_view import section, terminal_lines
from testbed.results.files import RecordWriter, read_records
from testbed.servers.sim import running_sim
from testbed.servers.sim.child import sim_process

FAST = {"interval_s": 0.1}


def run_load(url: str, out: Path, **config: Any) -> ProbeOutcome:
    with RecordWriter(out / "records.jsonl") as records:
        ctx = ProbeContext(
            endpoints={"sim": Endpoint(base_url=url)},
            config=LoadProbe.model_validate(config),
            out_dir=out,
            records=records,
            seed=3,
        )
        return asyncio.run(load.run(ctx))


@pytest.fixture(scope="module")
def paced_url() -> Any:
    """A simulator with 2 ms between tokens, so requests are in flight between scrapes."""
    with sim_process("--ttft-ms", "5", "--itl-ms", "2") as url:
        yield url


def test_load_samples_align_with_records_and_counts_match(paced_url: str, tmp_path: Path) -> None:
    outcome = run_load(
        paced_url,
        tmp_path,
        concurrency=4,
        duration_s=1.2,
        dataset={"input_tokens": 32, "output_tokens": 48},
        server_metrics=FAST,
    )
    part = outcome.summary["server_metrics"]
    sim = part["deployments"]["sim"]
    records = read_records(tmp_path / "records.jsonl")
    samples = read_samples(tmp_path / SAMPLES_FILE)
    assert next(s["phase"] for s in samples) == "start"
    assert samples[-1]["phase"] == "final"
    # one clock: the baseline before the first request, the final samples after the last
    assert samples[0]["t_ns"] < min(r["sent_ns"] for r in records)
    assert samples[-1]["sent_ns"] > max(r["done_ns"] for r in records)
    assert all(a["t_ns"] <= b["sent_ns"] for a, b in itertools.pairwise(samples))
    assert sim["samples"] >= 8, sim
    assert sim["failed_scrapes"] == 0
    # the simulator's counters are exact: equal to the client's counts
    assert sim["generation_tokens"] == sum(r["output_tokens"] for r in records) == 48 * len(records)
    assert sim["prompt_tokens"] == 32 * len(records)
    assert {m["field"]: m["relative"] for m in sim["mismatch"]} == {
        "generation_tokens": 0.0,
        "prompt_tokens": 0.0,
    }
    assert part["flagged"] == []
    # four closed-loop workers: the server saw at most four, and some, running
    assert 1.0 <= sim["running"]["max"] <= 4.0
    assert sim["waiting"]["max"] == 0.0
    assert sim["kv_cache_usage"]["max"] == 0.0  # no KV cache attached: nothing in use
    assert sim["generation_tokens_per_s"] > 0
    assert part["sampler"]["cpu_ms_per_scrape"] < 50.0
    assert not (tmp_path / ".server-metrics.err").exists()


def test_disabled_scrapes_nothing(paced_url: str, tmp_path: Path) -> None:
    outcome = run_load(
        paced_url, tmp_path, requests=4, duration_s=None, server_metrics={"enabled": False}
    )
    assert outcome.summary["server_metrics"] == {"enabled": False}
    assert not (tmp_path / SAMPLES_FILE).exists()


async def test_a_server_without_metrics_is_noted(tmp_path: Path) -> None:
    endpoint = Endpoint(base_url="http://127.0.0.1:9", metrics_path=None)
    async with sampling(tmp_path, {"x": endpoint}, ServerMetrics()) as session:
        assert not session.active
    assert session.problems == ["x: the server has no metrics endpoint"]


async def test_the_sampler_dies_with_the_probe(tmp_path: Path) -> None:
    """An exception (or Ctrl-C) in the probe stops the sampler at once; nothing is left."""
    seen: list[int | None] = []

    async def probe_breaks(url: str) -> None:
        async with sampling(tmp_path, {"sim": Endpoint(url)}, ServerMetrics()) as session:
            assert session.active, session.problems
            seen.append(session.pid)
            raise RuntimeError("probe broke")

    async with running_sim(SimParams()) as url:
        with pytest.raises(RuntimeError, match="probe broke"):
            await probe_breaks(url)
    assert seen[0] is not None
    assert not Path(f"/proc/{seen[0]}").exists()
    assert read_samples(tmp_path / SAMPLES_FILE)[0]["phase"] == "start"


async def test_ab_scrapes_both_sides(tmp_path: Path) -> None:
    async with (
        running_sim(SimParams(itl_ms=1.0, seed=1)) as stable_url,
        running_sim(SimParams(itl_ms=1.0, seed=1)) as canary_url,
    ):
        config = AbProbe.model_validate(
            {
                "stable": "a",
                "canary": "b",
                "requests": 12,
                "max_tokens": 8,
                "server_metrics": FAST,
            }
        )
        endpoints = {"a": Endpoint(stable_url), "b": Endpoint(canary_url)}
        with RecordWriter(tmp_path / "records.jsonl") as records:
            ctx = ProbeContext(endpoints, config, tmp_path, records, seed=5, base_dir=tmp_path)
            outcome = await ab.run(ctx)
    part = outcome.summary["server_metrics"]
    assert set(part["deployments"]) == {"a", "b"}
    for side in ("a", "b"):
        assert part["deployments"][side]["generation_tokens"] == 12 * 8
        assert part["deployments"][side]["client"]["output_tokens"] == 12 * 8
    assert part["flagged"] == []
    html = section(tmp_path, outcome.summary, read_records(tmp_path / "records.jsonl"), "k")
    assert html.count("<svg") == 1
    assert "<td>a</td>" in html
    assert "<td>b</td>" in html


def _samples(generation: list[float], prompt: list[float] | None = None) -> list[dict[str, Any]]:
    phases = ["start"] + ["during"] * (len(generation) - 2) + ["final"]
    prompts = prompt or [None] * len(generation)
    return [
        {
            "deployment": "d",
            "phase": phase,
            "sent_ns": i * 1_000_000_000,
            "t_ns": i * 1_000_000_000 + 1000,
            "running": float(i % 3),
            "waiting": 0.0,
            "kv_cache_usage": 0.5,
            "prompt_tokens": p,
            "generation_tokens": g,
            "error": None,
            "sampler_cpu_s": 0.3 + i * 0.001,
        }
        for i, (phase, g, p) in enumerate(zip(phases, generation, prompts, strict=True))
    ]


def test_mismatch_beyond_the_threshold_is_flagged() -> None:
    samples = _samples([100.0, 150.0, 200.0], [10.0, 20.0, 30.0])
    settings = ServerMetrics(token_mismatch_threshold=0.05)
    close = summarise(samples, {"d": ClientTokens(97, 20)}, settings)
    assert close["flagged"] == []  # 100 vs 97: 3.1 % apart
    far = summarise(samples, {"d": ClientTokens(90, 20)}, settings)
    assert len(far["flagged"]) == 1
    assert "server counted 100 output tokens, the client 90" in far["flagged"][0]
    mismatch = far["deployments"]["d"]["mismatch"][0]
    assert mismatch["relative"] == pytest.approx(10 / 90)
    assert any(line.startswith("MISMATCH beyond 5.0%") for line in headline(far))
    assert "differ beyond 5.0%" in terminal_lines("t1", {"server_metrics": far})[0]
    assert far["deployments"]["d"]["kv_cache_usage"]["mean"] == pytest.approx(0.5)


def test_window_picks_the_gauge_samples_and_the_rate() -> None:
    samples = _samples([0.0, 10.0, 30.0, 60.0, 100.0])
    window = (1_000_000_000, 3_000_010_000)  # samples 1..3
    part = summarise(samples, {}, ServerMetrics(), window)["deployments"]["d"]
    assert part["running"] == {"mean": 1.0, "max": 2.0, "n": 3}
    assert part["generation_tokens_per_s"] == pytest.approx(25.0)
    assert part["generation_tokens"] == 100.0
    assert part["mismatch"] == []  # no client count given


def test_a_reset_counter_gives_no_count() -> None:
    part = summarise(_samples([50.0, 80.0, 5.0, 20.0]), {}, ServerMetrics())
    assert part["deployments"]["d"]["generation_tokens"] is None


def test_report_section_plots_and_flags(tmp_path: Path) -> None:
    samples = _samples([0.0, 40.0, 80.0], [0.0, 10.0, 20.0])
    (tmp_path / SAMPLES_FILE).write_text("".join(json.dumps(s) + "\n" for s in samples))
    part = summarise(samples, {"d": ClientTokens(60, 20)}, ServerMetrics())
    records = [{"sent_ns": 0, "done_ns": 1_500_000_000, "output_tokens": 60, "status": 200}]
    html = section(tmp_path, {"server_metrics": part}, records, "key")
    assert html.count("<svg") == 1
    assert 'class="flag"' in html
    assert "server counted 80 output tokens, the client 60" in html
    assert "KV cache" in html


SCRIPT = """
import asyncio, sys
from pathlib import Path
from testbed.clients.endpoint import Endpoint
from testbed.config.server_metrics import ServerMetrics
from testbed.probes.server_metrics import sampling
from testbed.servers.sim import running_sim

async def main():
    async with running_sim() as url:
        settings = ServerMetrics(interval_s=0.1)
        async with sampling(Path(sys.argv[1]), {"sim": Endpoint(url)}, settings) as session:
            print(session.pid, flush=True)
            await asyncio.sleep(60)

asyncio.run(main())
"""


def _exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # ended; its new parent has not reaped it yet


def test_the_sampler_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    """SIGKILL of the probe's process (no chance to clean up): the sampler sees its input
    close and ends by itself — no orphan keeps scraping."""
    import subprocess
    import sys
    import time

    parent = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert not _exited(pid)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
    killed = time.monotonic()
    while not _exited(pid) and time.monotonic() < killed + 10:
        time.sleep(0.05)
    assert _exited(pid), "the sampler outlived its parent"
    assert read_samples(tmp_path / SAMPLES_FILE)[-1]["phase"] == "final"


def test_estimates_are_shown_but_never_flagged() -> None:
    samples = _samples([0.0, 50.0, 100.0], [0.0, 10.0, 20.0])
    estimate = ClientTokens(50, 20, "estimate", "estimate")
    part = summarise(samples, {"d": estimate}, ServerMetrics())
    generation = part["deployments"]["d"]["mismatch"][0]
    assert generation["relative"] == pytest.approx(1.0)
    assert not generation["flagged"]
    assert "the client 50 (an estimate)" in generation["message"]
    assert part["flagged"] == []


def test_client_counts_of_load_records() -> None:
    served = {"status": 200, "output_tokens": 8, "input_tokens": 5}
    with_usage = [{**served, "usage_output_tokens": 8, "usage_input_tokens": 6}] * 3
    never_reached = {"status": 0, "output_tokens": 0, "input_tokens": 5}
    counts = load_client_tokens([*with_usage, never_reached], exact=False)
    assert counts == ClientTokens(24, 18, "server usage", "server usage")
    bare = [{**served, "usage_output_tokens": None, "usage_input_tokens": None}] * 2
    assert load_client_tokens(bare, exact=False) == ClientTokens(16, 10, "estimate", "estimate")
    assert load_client_tokens(bare, exact=True).output_basis == "client tokenizer"


def test_server_usage_is_read_from_usage_fields_not_the_clients_count() -> None:
    """A load record's ``output_tokens`` is the client's count (issue 32); the server's
    usage sits beside it, and "server usage" means that one."""
    served = {"status": 200, "output_tokens": 8, "client_output_tokens": 8, "input_tokens": 5}
    records = [{**served, "usage_output_tokens": 7, "usage_input_tokens": 6}] * 3
    assert load_client_tokens(records, exact=True) == ClientTokens(
        21, 18, "server usage", "server usage"
    )
