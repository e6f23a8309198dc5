"""``testbed history``: a configuration's metric over the runs of the index, change points by
Apache Otava's e-divisive method, exit 1 when the newest run carries a regression (issue 36).

Synthetic indexes of 30 runs: seeded noise of 2 %, with a 15 % step up in TTFT (worse) from
run 20 on, or none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from testbed.cli import main
from testbed.results.index import ResultsIndex, RunEntry, TreatmentEntry

RUNS = 30


def index_of(tmp_path: Path, values: list[float], metric: str = "ttft_ms.p50") -> str:
    url = f"sqlite:///{tmp_path / 'index.sqlite'}"
    with ResultsIndex(url) as index:
        for n, value in enumerate(values, start=1):
            index.add_run(
                RunEntry(
                    run_id=f"run-{n:02d}",
                    campaign="nightly",
                    campaign_hash="c0ffee",
                    started=f"2026-11-{n:02d}T00:00:00Z",
                    status="PASS",
                    testbed_version="0.1",
                    hostname="box",
                    meta={"servers": [{"server": "vllm", "version": f"0.6.{n}"}]},
                    treatments=[
                        TreatmentEntry(
                            id=f"t{n}",  # ids change; the params key keeps the series
                            dir="001__load__abc",
                            probe="load",
                            params_key="k1",
                            params={"load.concurrency": 4},
                            status="PASS",
                            metrics={metric: value, "requests.total": 100.0},
                        )
                    ],
                )
            )
    return url


def noise(seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [100.0 * (1 + rng.normal(0, 0.02)) for _ in range(RUNS)]


def history(tmp_path: Path, url: str, *flags: str) -> tuple[int, dict[str, Any], str]:
    page, out = tmp_path / "history.html", tmp_path / "history.json"
    code = main(["history", "--index", url, "--html", str(page), "--json", str(out), *flags])
    return code, json.loads(out.read_text()), page.read_text()


def test_a_step_at_run_20_is_marked_there_and_fails(tmp_path: Path) -> None:
    values = [v * (1.15 if n >= 20 else 1.0) for n, v in enumerate(noise(7), start=1)]
    code, found, page = history(tmp_path, index_of(tmp_path, values))
    assert code == 1
    (series,) = found["series"]  # requests.total has no direction: not a series
    assert (series["metric"], series["regression"]) == ("ttft_ms.p50", True)
    (change,) = series["change_points"]
    assert (change["run"], change["run_id"], change["worse"]) == (20, "run-20", True)
    assert 0.10 < change["change"] < 0.20
    changes = page[page.index("first run after") :]  # the table of the change points
    assert tuple(r for r in ("run-19", "run-20") if r in changes) == ("run-19", "run-20")
    assert "vllm 0.6.20" in page
    assert page.count("<svg") == 1


def test_noise_alone_has_no_change_point_and_passes(tmp_path: Path) -> None:
    for seed in (1, 2, 3):
        folder = tmp_path / str(seed)
        folder.mkdir()
        code, found, page = history(folder, index_of(folder, noise(seed)))
        assert code == 0
        assert found["series"][0]["change_points"] == []
        assert "no change point" in page


def test_a_step_for_the_better_is_marked_but_passes(tmp_path: Path) -> None:
    values = [v * (0.85 if n >= 20 else 1.0) for n, v in enumerate(noise(7), start=1)]
    code, found, _ = history(tmp_path, index_of(tmp_path, values))
    assert code == 0
    (change,) = found["series"][0]["change_points"]
    assert (change["run"], change["worse"]) == (20, False)


def test_a_step_below_the_threshold_passes(tmp_path: Path) -> None:
    values = [v * (1.15 if n >= 20 else 1.0) for n, v in enumerate(noise(7), start=1)]
    code, found, _ = history(tmp_path, index_of(tmp_path, values), "--threshold", "20%")
    assert code == 0
    assert found["series"][0]["change_points"][0]["run"] == 20


def test_no_index_is_a_clear_input_error(tmp_path: Path, capsys: Any) -> None:
    assert main(["history", "--runs", str(tmp_path)]) == 2
    assert "no results index" in capsys.readouterr().err
