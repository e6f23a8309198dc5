"""docs/img/ttft_by_turn.png: TTFT by turn index of one conversation dataset against the
simulator with its prefix cache on and off (docs/load.md, "Multi-turn sessions").

Generated sessions (6 turns of 300 new tokens, 80-token answers, chat), 4 in flight, 240
turns, against two simulators alike but for ``prefix_caching``: prefill costs 50 µs per
prompt token not in the cache. The cached run's later turns stay as fast as the first; the
uncached run's grow with the history.

    PYTHONPATH=src .venv/bin/python bench/sessions_figure.py [--out docs/img/ttft_by_turn.png]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg

from testbed.clients.endpoint import Endpoint
from testbed.config.load import LoadProbe
from testbed.probes.base import ProbeContext
from testbed.probes.load import run
from testbed.probes.load.turn_plots import ttft_by_turn
from testbed.results.files import RecordWriter
from testbed.servers.sim.child import sim_process

SIM = ["--ttft-ms", "10", "--itl-ms", "2", "--ttft-per-prompt-token-ms", "0.05"]
SIM += ["--kv-cache-tokens", "262144"]
LOAD = {
    "api": "chat",
    "concurrency": 4,
    "requests": 240,
    "plots": False,
    "dataset": {
        "kind": "sessions",
        "sessions": 60,
        "turns": 6,
        "input_tokens": 300,
        "output_tokens": 80,
        "think_time_s": 0.05,
    },
}


def by_turn(caching: bool) -> list[dict[str, Any]]:
    flags = [*SIM, "--set", f"prefix_caching={str(caching).lower()}"]
    with sim_process(*flags) as url, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        with RecordWriter(out / "records.jsonl") as records:
            ctx = ProbeContext(
                endpoints={"sim": Endpoint(base_url=url)},
                config=LoadProbe.model_validate(LOAD),
                out_dir=out,
                records=records,
                seed=1,
            )
            outcome = asyncio.run(run(ctx))
    rows: list[dict[str, Any]] = outcome.summary["by_turn"]
    for row in rows:
        print(caching, row["turn"], row["input_tokens_mean"], row["ttft_ms"]["p50"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/img/ttft_by_turn.png")
    args = parser.parse_args()
    lines = {"prefix cache on": by_turn(True), "prefix cache off": by_turn(False)}
    fig = ttft_by_turn(lines, "TTFT by turn: 60 chat sessions of 6 turns, simulator")
    FigureCanvasAgg(fig)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
