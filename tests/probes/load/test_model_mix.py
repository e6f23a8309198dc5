"""A load over several models or LoRA adapters of one endpoint (issue 37): the mix is dealt
in exact, interleaved shares; each record names its model; summary.json has each model's
figures beside the overall ones, and the simulator's per-adapter latency shows in them."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

from testbed.cli import main
from testbed.config.shaping import ModelShare
from testbed.config.sim import SimParams
from testbed.probes.load import model_plots
from testbed.probes.load.dataset import Item
from testbed.probes.load.mix import assign, schedule
from testbed.servers.sim import serve_in_thread


def test_the_schedule_is_exact_and_interleaved() -> None:
    shares = [ModelShare(name="a", weight=3), ModelShare(name="b", weight=1)]
    assert schedule(shares, 8) == ["a", "a", "b", "a"] * 2
    three = [ModelShare(name=n, weight=w) for n, w in (("x", 1), ("y", 2), ("z", 3))]
    dealt = schedule(three, 600)
    assert Counter(dealt) == {"x": 100, "y": 200, "z": 300}
    assert dealt[:6] == ["z", "y", "x", "z", "y", "z"]  # one cycle: every model, spread out
    assert max(len(list(run)) for _, run in itertools.groupby(dealt)) == 2  # z z at a seam


def test_a_rows_own_model_is_kept_and_not_counted_in_the_mix() -> None:
    items = [Item("p", 1, 1, model="mine"), Item("q", 1, 1), Item("r", 1, 1)]
    dealt = assign(items, [ModelShare(name="a"), ModelShare(name="b")], "base")
    assert [i.model for i in dealt] == ["mine", "a", "b"]
    assert [i.model for i in assign(items, None, "base")] == ["mine", "base", "base"]


def test_three_adapters_have_their_own_figures(tmp_path: Path) -> None:
    params = SimParams(
        model_name="base",
        itl_ms=1.0,
        models={"a": {"ttft_ms": 15.0}, "b": {"ttft_ms": 40.0}, "c": {"ttft_ms": 80.0}},
    )
    out = tmp_path / "load"
    flags = ["--requests", "40", "--concurrency", "4", "--output-tokens", "4", "--no-plots"]
    with serve_in_thread(params) as url:
        code = main(["load", url, *flags, "--models", "a=2,b,c", "--out", str(out)])
    assert code == 0
    written = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert Counter(r["model"] for r in written) == {"a": 20, "b": 10, "c": 10}
    summary = json.loads((out / "summary.json").read_text())
    models = summary["models"]
    assert list(models) == ["a", "b", "c"]
    assert {n: m["requests"]["total"] for n, m in models.items()} == {"a": 20, "b": 10, "c": 10}
    assert sum(m["ttft_ms"]["n"] for m in models.values()) == summary["ttft_ms"]["n"]
    # each adapter's TTFT is its own: at least what the simulator waits, and in order
    p50 = {n: m["ttft_ms"]["p50"] for n, m in models.items()}
    assert p50["a"] >= 15.0
    assert p50["b"] >= 40.0
    assert p50["c"] >= 80.0
    assert p50["a"] < p50["b"] < p50["c"]


def test_an_unknown_adapter_fails_in_its_own_figures(tmp_path: Path) -> None:
    out = tmp_path / "load"
    flags = ["--requests", "8", "--output-tokens", "2", "--no-plots", "--out", str(out)]
    with serve_in_thread(SimParams(model_name="base", models={"a": {}})) as url:
        assert main(["load", url, *flags, "--models", "a,typo"]) == 1
    models = json.loads((out / "summary.json").read_text())["models"]
    assert models["a"]["requests"]["errors"] == 0
    assert models["typo"]["requests"]["errors"] == 4
    said = (
        "HTTP 404: the server refused the request: The model `typo` does not exist."
        " Valid aliases: base. (type NotFoundError, param model, code 404)"
    )
    assert models["typo"]["requests"]["top_errors"] == {said: 4}


def test_one_model_has_no_per_model_figures(tmp_path: Path) -> None:
    out = tmp_path / "load"
    flags = ["--requests", "4", "--output-tokens", "2", "--no-plots", "--out", str(out)]
    with serve_in_thread(SimParams()) as url:
        assert main(["load", url, *flags]) == 0
    assert "models" not in json.loads((out / "summary.json").read_text())
    first = json.loads((out / "records.jsonl").read_text().splitlines()[0])
    assert first["model"] == "sim-model"


def test_the_picture_and_table_by_model(tmp_path: Path) -> None:
    def figures(p50: float | None) -> dict[str, Any]:
        ms = {"p50": p50, "p99": None if p50 is None else 2 * p50}
        return {
            "ttft_ms": ms,
            "itl_ms": ms,
            "e2e_ms": ms,
            "throughput": {"requests_per_s": 1.0},
            "requests": {"ok": 0 if p50 is None else 3, "total": 3},
        }

    stage = {"stage": "concurrency-4", "models": {"a": figures(10.0), "b": figures(None)}}
    assert model_plots.write(tmp_path, [{"stage": "plain"}]) == []
    assert model_plots.write(tmp_path, [stage]) == ["ttft_by_model.png"]
    assert (tmp_path / "ttft_by_model.png").stat().st_size > 1000
    table = model_plots.table(stage)
    assert table is not None
    assert [c.header for c in table.columns][:4] == ["model", "requests", "req/s", "TTFT p50"]
    assert list(table.columns[0].cells) == ["a", "b"]
    assert list(table.columns[3].cells) == ["10.00", "–"]
    assert model_plots.table({"stage": "plain"}) is None
