"""The A/B evidence tables render every criterion with its numbers, test and status."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Console

from testbed.config.ab import AbProbe
from testbed.probes.ab import analyse
from testbed.report.ab_table import render_ab

MS = 1_000_000


def _records(n: int, slow: float) -> list[dict[str, Any]]:
    out = []
    for pair in range(n):
        for side, factor in (("stable", 1.0), ("canary", slow)):
            sent = pair * 100 * MS
            chunks = [sent + round((10 + pair % 7 + i * 2) * factor * MS) for i in range(6)]
            out.append(
                {
                    "side": side,
                    "pair": pair,
                    "seq": 2 * pair,
                    "prompt_id": f"p{pair}",
                    "sent_ns": sent,
                    "chunks_ns": chunks,
                    "done_ns": chunks[-1],
                    "error": None,
                    "text": "a" if side == "stable" or pair % 5 else "b",
                }
            )
    return out


def test_render_shows_the_evidence() -> None:
    probe = AbProbe(stable="blue", canary="green", criteria={"max_e2e_p50_regression": 0.1})
    outcome = asyncio.run(analyse(_records(60, 1.4), probe, seed=3, scorer=None))
    console = Console(record=True, width=200)
    render_ab({"verdict": {}, **outcome.summary}, console)
    text = console.export_text()
    for expected in (
        "blue (stable) vs green (canary)",
        "output agreement (exact)",
        "ttft_ms p50 ratio canary/stable",
        "Wilcoxon signed-rank",
        "Farrington–Manning",
        "FAIL",
        "95% interval",
        "Mann–Whitney p",
        "differs on p0",
        "errors: stable 0/60, canary 0/60",
    ):
        assert expected in text, expected
    ratio = outcome.summary["ab"]["latency"]["e2e_ms"]["ratio"]
    assert f"{ratio:.4g}" in text
