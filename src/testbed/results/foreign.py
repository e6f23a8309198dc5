"""Results another harness wrote, read as llm-d Benchmark Reports (v0.2.x).

A file given to ``testbed report`` or ``testbed compare`` that is not a testbed folder may be:

- an llm-d **Benchmark Report** (JSON or YAML, ``version: 0.2.x``) — validated by the
  ``llmd-benchmark-report`` package;
- a **guidellm** results file (``benchmarks: [{metrics: {time_to_first_token_ms …}}]``),
  one report per benchmark (a sweep holds several);
- a **vLLM benchmark** result (``vllm bench serve --save-result``: ``completed``,
  ``mean_ttft_ms`` …);
- an **inference-perf** lifecycle metrics file (``load_summary``, ``successes``), the stage
  read from its name (``stage_N_lifecycle_metrics.json``) as inference-perf writes it.

The last three go through the package's own converters (``native_to_br0_2``), so the numbers
testbed reads are the ones llm-d's tooling reads. The converters look at the llm-d-benchmark
harness's environment (``LLMDBENCH_*``) for what a harness pod knows; outside one they fill
only what the file holds, and what they warn about on standard error is kept as notes.

``PATH#N`` names one benchmark of a file that holds several (N from 0, as the package's
``benchmark-report -i N``).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testbed.core.errors import InputError, MissingDependency
from testbed.results import benchmark_report

#: The tool names of the Benchmark Report (``scenario.load.standardized.tool``).
REPORT = "benchmark-report"
GUIDELLM = "guidellm"
VLLM = "vllm-benchmark"
INFERENCE_PERF = "inference-perf"
_SELECTED = re.compile(r"^(?P<file>.+)#(?P<index>\d+)$")


@dataclass
class ForeignResults:
    """A results file read as Benchmark Reports: one per benchmark it holds."""

    path: Path  # the file (without a ``#N`` selection)
    kind: str  # REPORT, GUIDELLM, VLLM or INFERENCE_PERF: what the file is
    reports: list[dict[str, Any]]
    indices: list[int]  # each report's index in the file
    notes: list[str] = field(default_factory=list)  # the converter's warnings

    @property
    def name(self) -> str:
        return self.path.name


def split_selection(path: Path) -> tuple[Path, int | None]:
    """``file.json#2`` → (file.json, 2); any other path → (path, None)."""
    match = _SELECTED.match(str(path))
    if match and not path.exists():
        return Path(match["file"]), int(match["index"])
    return path, None


def read(path: Path) -> ForeignResults | None:
    """The file at ``path`` as Benchmark Reports, or None when it is no results file testbed
    knows (a folder, a file of another shape). A file of a known shape that its converter
    cannot read is the user's mistake (exit 2)."""
    file, selected = split_selection(path)
    document = _load(file)
    kind = _kind_of(file, document)
    if kind is None:
        return None
    if kind == REPORT:
        reports, notes = [_validated(file, document)], list[str]()
    else:
        reports, notes = _convert(file, kind, document)
    indices = list(range(len(reports)))
    if selected is not None:
        if selected >= len(reports):
            raise InputError(
                f"{path}: {file.name} holds {len(reports)} benchmark(s), numbered from 0"
            )
        reports, indices = [reports[selected]], [selected]
    return ForeignResults(file, kind, reports, indices, notes)


def _load(file: Path) -> Any:
    if not file.is_file() or file.suffix.lower() not in (".json", ".yaml", ".yml"):
        return None
    try:
        text = file.read_text(encoding="utf-8")
        return json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
        return None


def _kind_of(file: Path, document: Any) -> str | None:
    if not isinstance(document, Mapping):
        return None
    if benchmark_report.is_report(document):
        return REPORT
    benchmarks = document.get("benchmarks")
    if isinstance(benchmarks, list) and benchmarks and isinstance(benchmarks[0], Mapping):
        return GUIDELLM if "metrics" in benchmarks[0] else None
    if "completed" in document and "mean_ttft_ms" in document:
        return VLLM
    if "load_summary" in document and ("successes" in document or "failures" in document):
        return INFERENCE_PERF
    return None


def _package() -> Any:
    try:
        import llmd_benchmark_report
    except ImportError as exc:
        raise MissingDependency("llmd-benchmark-report", "llmd") from exc
    return llmd_benchmark_report


def _validated(file: Path, document: Mapping[str, Any]) -> dict[str, Any]:
    """A Benchmark Report as the package's validation accepts it."""
    package = _package()
    try:
        package.load_benchmark_report(dict(document))
    except Exception as exc:  # pydantic's ValidationError, or the package's own
        first = str(exc).splitlines()[:6]
        raise InputError(
            f"{file}: not a valid llm-d Benchmark Report {document.get('version')}:\n  "
            + "\n  ".join(first)
        ) from exc
    return dict(document)


def _convert(
    file: Path, kind: str, document: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The package's converter for ``kind`` on ``file``; its stderr kept as notes."""
    _package()
    from llmd_benchmark_report import native_to_br0_2 as convert

    converters: dict[str, Callable[[str], Any]] = {
        GUIDELLM: convert.import_guidellm_all,
        VLLM: convert.import_vllm_benchmark,
        INFERENCE_PERF: convert.import_inference_perf,
    }
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            made = converters[kind](str(file))
    except Exception as exc:  # a converter raises what its input makes it raise
        said = "\n  ".join(str(exc).splitlines()[:6])
        raise InputError(
            f"{file}: read as {kind} results, but llmd-benchmark-report's converter cannot"
            f" convert it ({type(exc).__name__}):\n  {said}\ngive the file {kind} wrote,"
            " unedited"
        ) from exc
    made = made if isinstance(made, list) else [made]
    reports = [r.model_dump(mode="json", exclude_none=True) for r in made]
    notes = [line.strip() for line in stderr.getvalue().splitlines() if line.strip()]
    # the converter's complaint about the llm-d harness's experiment id is about a harness
    # pod this file did not come from: not the user's concern
    notes = [n for n in notes if "experiment ID" not in n]
    return reports, notes
