"""The report's scale section: thresholds, interval quantiles, errors, the plot and the CSV."""

from __future__ import annotations

from pathlib import Path

from testbed.report.scale_view import section
from testbed.results.run_summary import TreatmentRow


def test_section_shows_verdict_evidence_quantiles_and_files(tmp_path: Path) -> None:
    (tmp_path / "001__s").mkdir()
    (tmp_path / "001__s" / "general.png").write_bytes(b"\x89PNG")
    (tmp_path / "001__s" / "times.csv").write_text("index\n")
    row = {
        "id": "a",
        "dir": "001__s",
        "probe": "scale",
        "params": {},
        "params_key": "k",
        "status": "FAIL",
        "reason": "p99 scheduled→running < 5 s: FAIL",
        "evidence": {
            "thresholds": [
                {
                    "threshold": "p99 scheduled→running < 5 s",
                    "status": "FAIL",
                    "value_ms": 7200.5,
                    "limit_ms": 5000.0,
                    "reached": 90,
                    "waiting": 10,
                    "why": "7200.5 ms over 5000 ms",
                }
            ],
            "errors": [{"name": "w-3", "error": "submit: <quota>"}],
            "error_count": 1,
        },
    }
    summary = {
        "scale": {
            "intervals": {
                "scheduled→running": {
                    "p50_ms": 12.0,
                    "p90_ms": None,
                    "p99_ms": None,
                    "reached": 90,
                    "waiting": 10,
                }
            },
            "files": ["times.csv", "general.png", "missing.png"],
        }
    }
    scale = TreatmentRow.model_validate(row)
    load = scale.model_copy(update={"probe": "load", "id": "b"})
    out = section(tmp_path, [scale, load], {"a": summary})
    assert out.count("<h3>") == 1
    assert "7200.5" in out
    assert "n/a" in out
    assert "&lt;quota&gt;" in out
    assert '<img src="001__s/general.png"' in out
    assert 'href="001__s/times.csv"' in out
    assert "missing.png" not in out
    assert section(tmp_path, [load.model_copy(update={"id": "a"})], {}) == ""
