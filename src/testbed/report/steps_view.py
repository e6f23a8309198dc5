"""The user's steps in the terminal and in report.html: one row per step in execution order
with its status, exit code, duration and a link to its folder; the last lines of a failed
step's output beside it (the run's ERROR says which step and why)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from rich.console import Console
from rich.table import Table

from testbed.core.secrets import redact
from testbed.results.steps import OK, STEPS_DIR, blocking

_STYLE = {OK: "green", "failed": "red", "timed out": "red", "interrupted": "yellow"}


def _e(value: Any) -> str:
    return escape(redact(str(value)))


def _what(row: Mapping[str, Any]) -> str:
    if row.get("kind") == "capture":
        return "capture: " + ", ".join(row.get("capture") or [])
    if row.get("kind") == "command":
        return f"{row.get('command')}: " + " ".join(row.get("argv") or [])
    return " ".join(row.get("argv") or [])


def _status(row: Mapping[str, Any]) -> str:
    status = str(row.get("status"))
    if status not in (OK, "not run", "skipped") and not blocking(row):
        return f"{status} (on_error: continue)"
    return status


def print_steps(steps: Sequence[Mapping[str, Any]], console: Console) -> None:
    """The steps table, and the output tail of each step that stopped the run."""
    if not steps:
        return
    table = Table(title="Steps", title_justify="left")
    for column in ("folder", "status", "exit", "s", "runs"):
        table.add_column(column, overflow="fold")
    for row in steps:
        style = _STYLE.get(str(row.get("status")), "dim")
        table.add_row(
            f"{STEPS_DIR}/{row['dir']}",
            f"[{style}]{_status(row)}[/{style}]",
            "" if row.get("exit_code") is None else str(row["exit_code"]),
            "" if row.get("duration_s") is None else f"{row['duration_s']:.1f}",
            redact(_what(row))[:200],
        )
    console.print(table)
    for row in steps:
        if blocking(row):
            why = row.get("message") or f"exit {row.get('exit_code')}"
            console.print(f"[red]step {row['dir']} {redact(str(why))}[/red]")
            for line in row.get("tail") or []:
                console.print(f"  {redact(line)}", markup=False, highlight=False)


def _folder(row: Mapping[str, Any], link: str) -> str:
    """The step's folder, linked when the step ran (a step never run has none)."""
    if row.get("status") in ("not run", "skipped"):
        return _e(row["dir"])
    return f'<a href="{_e(link)}">{_e(row["dir"])}</a>'


def render_steps(steps: Sequence[Mapping[str, Any]], console: Console) -> None:
    """The planned steps (``testbed plan``): folder, on_error, timeout, rendered arguments."""
    if not steps:
        return
    table = Table(title="Steps", title_justify="left")
    for column in ("folder", "on error", "timeout s", "runs"):
        table.add_column(column, overflow="fold")
    for row in steps:
        parallel = sum(1 for other in steps if other["block"] == row["block"]) > 1
        table.add_row(
            f"{STEPS_DIR}/{row['dir']}" + (" ∥" if parallel else ""),
            str(row["on_error"]),
            "" if row.get("timeout_s") is None else f"{row['timeout_s']:g}",
            redact(_what(row)),
        )
    console.print(table)
    console.print("∥: runs at once with its neighbours marked so (a parallel: group)")


def section(steps: Sequence[Mapping[str, Any]]) -> str:
    """The report's Steps section: the table, then each failed step's last lines."""
    if not steps:
        return ""
    rows = []
    for row in steps:
        link = f"{STEPS_DIR}/{row['dir']}/"
        status = str(row.get("status"))
        css = (
            "PASS"
            if status == OK
            else ("ERROR" if blocking(row) else "INCONCLUSIVE")
            if status in _STYLE
            else "SKIPPED"
        )
        tail = row.get("tail") or []
        details = (
            f"<details{' open' if blocking(row) else ''}><summary>last lines</summary>"
            f"<pre><code>{_e(chr(10).join(tail))}</code></pre></details>"
            if tail
            else ""
        )
        message = f"<br>{_e(row['message'])}" if row.get("message") else ""
        rows.append(
            f'<tr><td class="num">{row["number"]}</td><td>{_e(row["phase"])}</td>'
            f"<td>{_folder(row, link)}</td>"
            f'<td><span class="badge {css}">{_e(_status(row))}</span></td>'
            f'<td class="num">{_e(row.get("exit_code", ""))}</td>'
            f'<td class="num">{_e(row.get("duration_s", ""))}</td>'
            f"<td><code>{_e(_what(row))}</code>{message}{details}</td></tr>"
        )
    head = (
        "<tr><th>#</th><th>phase</th><th>folder</th><th>status</th><th>exit</th>"
        "<th>s</th><th>runs</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"
