"""Make the pictures of docs/results.md with testbed's own code: ``python docs/images/generate.py``.

- ``headline.png``: report.html's "Load at a glance" of a real run (the simulator at TTFT
  20 ms / ITL 5 ms, concurrency 1 and 4);
- ``history.png``: one plot of ``testbed history``'s page over a synthetic index of 30 runs,
  2 % noise and a 15 % step at run 20 (the case tests/results/test_history.py checks);
- ``run_history.png``: the History section of a run's report.html when its configuration's
  history in the index changed (tests/report/test_run_history.py's case);
- ``compare_guidellm.txt``, ``run_history.txt``: the terminal of ``testbed compare`` of a
  guidellm benchmark (tests/fixtures/harnesses) with a ``testbed load`` folder, and of
  ``testbed run`` naming a change point.

Each HTML fragment is shown alone in headless Chromium (Debian's ``chromium``), the screenshot
trimmed and reduced to 64 colours (Pillow, which matplotlib brings), to keep the files small.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CAMPAIGN = """\
name: nightly
deployments:
  - name: sim
    server: sim
    params: {ttft_ms: 20, itl_ms: 5, seed: 1}
load:
  profile: concurrency
  requests: 60
  plots: false
matrix:
  factors:
    load.concurrency: [1, 4]
"""


def run_cli(*argv: str) -> tuple[int, str]:
    """``testbed ARGV`` in this process, its terminal output (120 columns) and exit code."""
    from testbed.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    # the temporary folders' paths say nothing to a reader of the docs
    return code, re.sub(re.escape(tempfile.gettempdir()) + r"/\S+/", "", out.getvalue())


def screenshot(fragment: str, target: Path, width: int = 1100) -> None:
    """``fragment`` with the report's CSS, drawn by headless Chromium, then trimmed."""
    css = resources.files("testbed.report").joinpath("report.css").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as folder:
        page, shot = Path(folder) / "page.html", Path(folder) / "shot.png"
        page.write_text(
            f'<!doctype html><html><head><meta charset="utf-8"><style>{css}'
            f"body{{margin:8px;background:#fff}}</style></head><body>{fragment}</body></html>"
        )
        subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={folder}/profile", f"--window-size={width},1400",
             f"--screenshot={shot}", page.as_uri()],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        _trim(shot, target)


def _trim(shot: Path, target: Path, border: int = 8) -> None:
    """The screenshot cut to what is drawn (white around it removed), 64 colours."""
    from PIL import Image, ImageChops

    image = Image.open(shot).convert("RGB")
    box = ImageChops.difference(image, Image.new("RGB", image.size, "white")).getbbox()
    if box is not None:
        left, top, right, bottom = box
        right, bottom = min(image.width, right + border), min(image.height, bottom + border)
        image = image.crop((max(0, left - border), max(0, top - border), right, bottom))
    image.quantize(colors=64).save(target, optimize=True)


def section(page: str, key: str) -> str:
    start = page.index(f'<section id="{key}">')
    return page[start : page.index("</section>", start) + len("</section>")]


def headline(work: Path) -> Path:
    campaign = work / "nightly.yaml"
    campaign.write_text(CAMPAIGN)
    code, _ = run_cli("run", str(campaign), "--out", str(work / "runs" / "today"))
    assert code == 0, code
    page = (work / "runs" / "today" / "report.html").read_text()
    screenshot(section(page, "headline"), HERE / "headline.png", width=1250)
    return work / "runs" / "today"


def history(work: Path) -> None:
    from testbed.results.index import ResultsIndex, RunEntry, TreatmentEntry

    rng = np.random.default_rng(7)
    url = f"sqlite:///{work / 'history.sqlite'}"
    with ResultsIndex(url) as index:
        for n in range(1, 31):
            value = 20.0 * (1 + rng.normal(0, 0.02)) * (1.15 if n >= 20 else 1.0)
            treatment = TreatmentEntry(
                id=f"t{n}", dir="001__sim-load__c4", probe="load", params_key="k",
                params={"load.concurrency": 4}, status="PASS", metrics={"ttft_ms.p50": value},
            )  # fmt: skip
            index.add_run(
                RunEntry(
                    run_id=f"run-{n:02d}", campaign="nightly", campaign_hash="c",
                    started=f"2026-10-{n:02d}T02:00:00Z", status="PASS", testbed_version="0.1",
                    hostname="ci", meta={"label": f"nightly {n}", "commit": f"{n * 7919:07x}"},
                    treatments=[treatment],
                )
            )  # fmt: skip
    html = work / "history.html"
    run_cli("history", "--index", url, "--html", str(html))
    page = html.read_text()
    body = page[page.index("<h2") : page.index("</table>") + len("</table>")]
    screenshot(body, HERE / "history.png", width=800)


def run_history(work: Path, today: Path) -> None:
    """A second run of the campaign over an index whose history of it stepped at run 13."""
    from testbed.results.index import ResultsIndex, RunEntry, TreatmentEntry

    rows = json.loads((today / "summary.json").read_text())["treatments"]
    row = next(r for r in rows if r["params"].get("load.concurrency") == 4)
    level = row["metrics"]["ttft_ms.p50"]
    rng = np.random.default_rng(5)
    with ResultsIndex(f"sqlite:///{today.parent / 'index.sqlite'}") as index:
        for n in range(1, 25):
            value = level * (1 + rng.normal(0, 0.02)) * (0.8 if n <= 12 else 1.0)
            treatment = TreatmentEntry(
                id=row["id"], dir=row["dir"], probe="load", params_key=row["params_key"],
                params=row["params"], status="PASS", metrics={"ttft_ms.p50": value},
            )  # fmt: skip
            index.add_run(
                RunEntry(
                    run_id=f"run-{n:02d}", campaign="nightly", campaign_hash="c",
                    started=f"2020-01-{n:02d}T02:00:00Z", status="PASS", testbed_version="0.1",
                    hostname="ci", meta={"label": f"nightly {n}", "commit": f"{n * 7919:07x}"},
                    treatments=[treatment],
                )
            )  # fmt: skip
    campaign = today.parent.parent / "nightly.yaml"
    _, printed = run_cli(
        "run", str(campaign), "--out", str(today.parent / "next"), "--label", "after the bump",
        "--commit", "5e1f00d",
    )  # fmt: skip
    lines = [x.rstrip() for x in printed.splitlines() if x.startswith(("history:", "  0"))]
    (HERE / "run_history.txt").write_text("\n".join(lines) + "\n")
    page = (today.parent / "next" / "report.html").read_text()
    screenshot(section(page, "history"), HERE / "run_history.png", width=800)


def compare_guidellm(work: Path, today: Path) -> None:
    guidellm = work / "guidellm.json"
    shutil.copy(ROOT / "tests" / "fixtures" / "harnesses" / "guidellm_benchmarks.json", guidellm)
    treatment = next(p for p in sorted(today.iterdir()) if p.name.startswith("002__"))
    picked = ("ttft_ms.p50", "ttft_ms.p99", "tpot_ms.p50", "e2e_ms.p50", "throughput.*")
    metrics = [flag for name in picked for flag in ("--metric", name)]
    # guidellm's second benchmark ran 4 streams, as the treatment's concurrency 4
    _, printed = run_cli("compare", f"{guidellm}#1", str(treatment), "--all", *metrics)
    printed = "\n".join(line.rstrip() for line in printed.splitlines()) + "\n"
    (HERE / "compare_guidellm.txt").write_text(printed)


def main() -> int:
    os.environ["COLUMNS"] = "230"  # the terminal pictures: wide enough not to fold
    sys.path.insert(0, str(ROOT / "src"))
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        today = headline(work)
        history(work)
        compare_guidellm(work, today)
        run_history(work, today)
    for name in ("headline.png", "history.png", "run_history.png"):
        print(f"{name}: {(HERE / name).stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
