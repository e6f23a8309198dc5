"""A tiny Chrome DevTools Protocol client for the report tests: start headless Chromium
(Debian's), open a page, collect console errors and exceptions, evaluate expressions.

Synchronous on purpose (websocket-client): it drives one page, step by step."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import websocket

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1280,2000",
]


class Browser:
    """Headless Chromium with one page target."""

    def __init__(self, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self.profile = Path(tempfile.mkdtemp(prefix="testbed-chromium-"))
        self.log = (self.profile.parent / f"{self.profile.name}.log").open("wb")
        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=self.log,
            stderr=self.log,
        )
        self.events: list[dict[str, Any]] = []
        self._next = 0
        port = self._port()
        targets = json.loads(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read()
        )
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=timeout_s, suppress_origin=True
        )
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(method)

    def _port(self) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its debugging port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The next event named ``method`` (earlier events are kept)."""
        seen = next((e for e in self.events if e.get("method") == method), None)
        deadline = time.monotonic() + self.timeout_s
        while seen is None and time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            self.events.append(message)
            if message.get("method") == method:
                seen = message
        if seen is None:
            raise TimeoutError(f"no {method} event")
        return seen

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[dict[str, Any]]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        bad = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            console_error = params.get("type") in ("error", "assert")
            if method == "Runtime.exceptionThrown" or (
                method == "Runtime.consoleAPICalled" and console_error
            ):
                bad.append(params)
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                bad.append(params["entry"])
        return bad

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("Browser.close")
        with contextlib.suppress(Exception):
            self.ws.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
