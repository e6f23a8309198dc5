"""What scraping server metrics costs: parsing one page, and the sampler process per scrape.

1. Parsing: a page shaped like vLLM's (its gauges and counters plus ``--histograms``
   histograms of 20 buckets, as vLLM exposes dozens) is parsed ``--repeat`` times with
   :func:`testbed.clients.prometheus.parse`, and, for comparison, whole with
   prometheus-client's parser (what it would cost without dropping the unread lines).
2. The sampler: a simulator child is scraped every ``--interval`` seconds for
   ``--duration`` seconds by the sampler process; its CPU per scrape is read from the
   samples (``sampler_cpu_s``), start-up excluded.

    .venv/bin/python bench/server_metrics_cost.py [--histograms 40] [--interval 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from testbed.clients.endpoint import Endpoint
from testbed.clients.prometheus import parse
from testbed.config.server_metrics import ServerMetrics
from testbed.probes.server_metrics import SAMPLES_FILE, sampling
from testbed.probes.server_metrics.summary import read_samples, summarise
from testbed.servers.sim.child import sim_process


def vllm_like_page(histograms: int) -> str:
    lines = [
        'vllm:num_requests_running{engine="0",model_name="m"} 7.0',
        'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0',
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.31',
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 123456.0',
        'vllm:generation_tokens_total{engine="0",model_name="m"} 654321.0',
    ]
    for h in range(histograms):
        name = f"vllm:histogram_{h}_seconds"
        lines.append(f"# HELP {name} A histogram.\n# TYPE {name} histogram")
        for i in range(20):
            lines.append(f'{name}_bucket{{engine="0",le="{0.001 * 2**i}",model_name="m"}} {i}')
        lines.append(f'{name}_bucket{{engine="0",le="+Inf",model_name="m"}} 20')
        lines.append(f'{name}_sum{{engine="0",model_name="m"}} 1.5')
        lines.append(f'{name}_count{{engine="0",model_name="m"}} 20')
    return "\n".join(lines) + "\n"


def parse_cost(histograms: int, repeat: int) -> None:
    page = vllm_like_page(histograms)
    t0 = time.process_time()
    for _ in range(repeat):
        parse(page)
    ours = (time.process_time() - t0) / repeat * 1e3
    t0 = time.process_time()
    for _ in range(repeat):
        for family in text_string_to_metric_families(page):
            list(family.samples)
    whole = (time.process_time() - t0) / repeat * 1e3
    print(f"page of {len(page) / 1024:.0f} KiB, {page.count(chr(10))} lines:")
    print(f"  parse (wanted lines only) {ours:.3f} ms CPU; whole page {whole:.3f} ms CPU")


async def sampler_cost(interval_s: float, duration_s: float) -> None:
    settings = ServerMetrics(interval_s=interval_s)
    with sim_process() as url, tempfile.TemporaryDirectory() as out:
        async with sampling(Path(out), {"sim": Endpoint(url)}, settings):
            await asyncio.sleep(duration_s)
        summary = summarise(read_samples(Path(out) / SAMPLES_FILE), {}, settings)
    sampler = summary["sampler"]
    print(
        f"sampler: {sampler['scrapes']} scrapes every {interval_s:g} s; start-up"
        f" {sampler['start_cpu_s']:.2f} s CPU; {sampler['cpu_ms_per_scrape']:.2f} ms CPU per"
        f" scrape ({sampler['cpu_ms_per_scrape'] / (interval_s * 1e3):.2%} of one core)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--histograms", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    parse_cost(args.histograms, args.repeat)
    asyncio.run(sampler_cost(args.interval, args.duration))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
