"""The HTML report in a real headless browser (Debian's chromium, `make system`): it loads
offline, every plot renders with a size, and the console stays free of errors."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from rich.console import Console

from testbed.report.run_summary import PublishOptions, publish
from tests.report.cdp import CHROMIUM, Browser
from tests.report.fake_runs import make_run

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Browser:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: run `make system`")
    with Browser() as b:
        yield b  # type: ignore[misc]


def test_report_renders_in_chromium(tmp_path: Path, browser: Browser) -> None:
    run = make_run(tmp_path, "r1", levels=(1, 2, 4), extras=True)
    publish(run, Console(file=None, quiet=True), PublishOptions(use_index=False))
    browser.events.clear()
    browser.open((run / "report.html").as_uri())
    assert browser.evaluate("document.title").startswith("testbed · demo · r1")
    sections = browser.evaluate("Array.from(document.querySelectorAll('section')).map(s => s.id)")
    assert sections == [
        "headline",  # the load figures at a glance open the report
        "verdicts",
        "correctness",
        "load",
        "ab",
        "treatments",
        "plan",
        "campaign",
        "run",
    ]
    plots = browser.evaluate(
        "Array.from(document.querySelectorAll('svg.plot')).map(s => {"
        " const r = s.getBoundingClientRect(); return [r.width, r.height,"
        " s.querySelectorAll('path').length]; })"
    )
    assert len(plots) == 5
    for width, height, paths in plots:
        assert width > 300
        assert height > 100
        assert paths > 10  # axes, lines, glyphs were drawn
    marks = browser.evaluate("document.querySelectorAll('.diff mark').length")
    assert marks >= 2
    shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
    assert shot.startswith(b"\x89PNG")
    assert len(shot) > 20_000  # not a blank page
    assert browser.errors() == []


def test_console_errors_would_be_seen(tmp_path: Path, browser: Browser) -> None:
    """The check above can fail: a page with a script error and a missing image is caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><img src="missing.png">'
        '<script>console.error("boom"); undefined_call();</script></body></html>'
    )
    browser.events.clear()
    browser.open(page.as_uri())
    kinds = {
        str(e.get("type") or e.get("source") or e.get("exceptionDetails", {}).get("text"))
        for e in browser.errors()
    }
    assert len(browser.errors()) >= 2, kinds
