"""Golden generation (``testbed record``): expected answers from a reference deployment.

Each case of a file is sent (unary) on each protocol it runs on; the answer becomes its
``expected:`` (or ``error:`` when the server refused). A case whose expectations are already
by protocol keeps those of the protocols not recorded this time. Everything else a case says — name,
request, evaluators, skip rules, ``skip_check`` — is written back as the user wrote it, and
so is the file's leading comment block. A hand-written ``error.message`` that the new
message still contains is kept (it may be deliberately loose, to hold on other servers).
Token texts and logprobs are recorded only for cases that ask for logprobs. An embeddings
case's golden vectors are recorded where it keeps them (:mod:`.embedding_goldens`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testbed.clients import tgis
from testbed.clients.endpoint import Endpoint
from testbed.clients.http import pool_for
from testbed.config.correctness import CorrectnessProbe
from testbed.config.yamlsource import safe_load
from testbed.core.clock import wall_label
from testbed.core.errors import CampaignError, InfrastructureError
from testbed.probes.correctness import embedding_goldens
from testbed.probes.correctness.cases import (
    PROTOCOLS,
    Case,
    CaseFile,
    EmbeddingCase,
    ProtocolName,
    load_case_file,
)
from testbed.probes.correctness.exchange import api_of, build_body, send
from testbed.probes.correctness.outputs import Output
from testbed.probes.correctness.runner import protocols_of
from testbed.probes.correctness.skip import skip_reason
from testbed.results.files import write_atomic

HEADER = "# Recorded by testbed record"
DECIMALS = 6
KEY_ORDER = ("name", "description", "api", "protocol", "request", "expected", "error")


@dataclass
class CaseFileGoldens:
    """One case file with its new expectations."""

    path: Path
    document: list[dict[str, Any]]  # the cases as written, expectations replaced
    notes: list[str] = field(default_factory=list)  # what changed or was left alone
    header: list[str] = field(default_factory=list)  # the file's leading comment lines
    #: golden files of embeddings cases, written beside the case file with it
    goldens: list[embedding_goldens.Golden] = field(default_factory=list)


def expected_from(output: Output, case: Case) -> dict[str, Any]:
    """The ``expected:`` of an answer (token details only where the case asks logprobs)."""
    data = output.to_json()
    keep = ["text", "completion_tokens", "prompt_tokens", "finish_reason"]
    if case.request.logprobs is not None:
        keep += ["token_texts", "logprobs", "top_logprobs"]
    out = {k: data[k] for k in keep if k in data}
    # Six decimals keep a thousand times the precision the tightest tolerance needs.
    if "logprobs" in out:
        out["logprobs"] = [round(v, DECIMALS) for v in out["logprobs"]]
    if "top_logprobs" in out:
        out["top_logprobs"] = [
            [[t, round(v, DECIMALS)] for t, v in row] for row in out["top_logprobs"]
        ]
    return out


def error_from(output: Output, case: Case | EmbeddingCase) -> dict[str, Any]:
    assert output.error is not None
    old = case.error
    message: str | None = output.error.message
    if old is not None:  # keep a hand-written message that still holds (or none at all)
        still = old.message is not None and old.message.lower() in output.error.message.lower()
        message = old.message if still or old.message is None else output.error.message
    out: dict[str, Any] = {"status": output.error.status}
    if message is not None:
        out["message"] = message
    if old is not None and old.match is not None:
        out["match"] = old.match
    return out


async def _answers(
    case: Case, protocols: list[ProtocolName], endpoint: Endpoint, timeout_s: float
) -> dict[ProtocolName, Output]:
    pool = pool_for(endpoint, max_connections=2)
    apis = {protocol: api_of(protocol, case.request) for protocol in protocols}
    grpc = tgis.pool_for(endpoint) if any(api.grpc for api in apis.values()) else None
    try:
        answers = {}
        for protocol, api in apis.items():
            body = build_body(api, case.request, endpoint.model, case.request.logprobs)
            channel = grpc if api.grpc and grpc is not None else pool
            exchange = await send(channel, api, body, stream=False, timeout_s=timeout_s)
            answers[protocol] = exchange.output
        return answers
    finally:
        await pool.aclose()
        if grpc is not None:
            await grpc.aclose()


def _apply(raw: dict[str, Any], case: Case, answers: Mapping[ProtocolName, Output]) -> str:
    """Write the answers into the case's raw mapping; return a note of what changed."""
    outputs = list(answers.values())
    refused = [o for o in outputs if o.error is not None]
    previous = raw.pop("expected", None)
    raw.pop("error", None)
    if refused and len(refused) == len(outputs):
        raw["error"] = error_from(refused[0], case)
        return f"{case.name}: error {refused[0].error.status if refused[0].error else ''}"
    if refused:
        sides = {p: (o.error.status if o.error else "answer") for p, o in answers.items()}
        raise InfrastructureError(f"{case.name}: the protocols disagree ({sides}); fix the case")
    by_protocol: dict[str, Any] = {p: expected_from(o, case) for p, o in answers.items()}
    values = list(by_protocol.values())
    if isinstance(previous, dict) and previous and set(previous) <= set(PROTOCOLS):
        # by protocol already: the protocols not recorded now keep their answers
        merged = {**previous, **by_protocol}
        if "tgis" in by_protocol and merged.get("tgi") == by_protocol["tgis"]:
            del merged["tgis"]  # the tgi answer stands for tgis
        raw["expected"] = merged
    else:
        raw["expected"] = values[0] if all(v == values[0] for v in values) else by_protocol
    return f"{case.name}: {values[0].get('text', '')[:50]!r}"


def _ordered(raw: dict[str, Any]) -> dict[str, Any]:
    first = {k: raw[k] for k in KEY_ORDER if k in raw}
    return first | {k: v for k, v in raw.items() if k not in first}


async def generate_file(
    path: Path,
    endpoint: Endpoint,
    config: CorrectnessProbe,
    deployment: Mapping[str, Any],
    progress: Callable[[str], None] = lambda _m: None,
) -> CaseFileGoldens:
    """New expectations for every case of ``path`` from ``endpoint``."""
    case_file: CaseFile = load_case_file(path, require_expected=False, read_goldens=False)
    typed: dict[str, Case | EmbeddingCase] = {c.name: c for c in case_file.cases}
    typed |= {c.name: c for c in case_file.embedding_cases}
    recorded = CaseFileGoldens(path, [], header=_header(path))
    served = set(endpoint.protocols)
    for raw in _raw_cases(path):
        case = typed[raw["name"]]
        if isinstance(case, EmbeddingCase):
            await _generate_embedding(raw, case, endpoint, config, deployment, recorded)
            progress(recorded.notes[-1])
            recorded.document.append(_ordered(raw))
            continue
        reason = skip_reason(case, deployment)
        protocols = [p for p in protocols_of(case, config) if p in served]
        # a chat case goes only where the protocol has a chat API
        protocols = [p for p in protocols if api_of(p, case.request).chat == case.request.chat]
        if case.skip_check or reason or not protocols:
            why = "skip_check" if case.skip_check else reason or "no protocol served"
            recorded.notes.append(f"{case.name}: left as it was ({why})")
        else:
            answers = await _answers(case, protocols, endpoint, config.timeout_s)
            recorded.notes.append(_apply(raw, case, answers))
            progress(recorded.notes[-1])
        recorded.document.append(_ordered(raw))
    return recorded


async def _generate_embedding(
    raw: dict[str, Any],
    case: EmbeddingCase,
    endpoint: Endpoint,
    config: CorrectnessProbe,
    deployment: Mapping[str, Any],
    recorded: CaseFileGoldens,
) -> None:
    """Record one embeddings case's golden (or refusal) into ``raw`` and ``recorded``."""
    reason = skip_reason(case, deployment)
    if reason is None and "openai" not in endpoint.protocols:
        reason = "no openai protocol served"
    if reason is None and not (case.needs_expected() or case.expected or case.error):
        reason = "nothing compares with a golden: ranking only"
    if case.skip_check or reason:
        why = "skip_check" if case.skip_check else reason
        recorded.notes.append(f"{case.name}: left as it was ({why})")
        return
    found = await embedding_goldens.answer(case, endpoint, config.timeout_s)
    if isinstance(found, Output):
        raw.pop("expected", None)
        raw["error"] = error_from(found, case)
        assert found.error is not None
        recorded.notes.append(f"{case.name}: error {found.error.status}")
        return
    note, golden = embedding_goldens.apply(raw, case, found, recorded.path)
    recorded.notes.append(note)
    if golden is not None:
        recorded.goldens.append(golden)


def _raw_cases(path: Path) -> list[dict[str, Any]]:
    data = safe_load(path.read_text(encoding="utf-8"), str(path))
    cases = data["cases"] if isinstance(data, dict) else data
    if not isinstance(cases, list):
        raise CampaignError(f"{path}: a case file is a list of cases")
    return cases


def _header(path: Path) -> list[str]:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith(HEADER):
            lines.append(line)
    return lines


class _Dumper(yaml.SafeDumper):
    """Block style for cases, flow style for short leaves, strings quoted only when needed."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if "\n" in value or value != value.strip() else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    """Short lists (of scalars, or of pairs such as top logprobs) on one line."""
    flat = all(_scalar(v) for v in value)
    pairs = all(isinstance(v, list) and all(_scalar(x) for x in v) for v in value)
    flow = (flat or pairs) and len(repr(value)) <= 90
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


def _dict(dumper: yaml.SafeDumper, value: dict[Any, Any]) -> yaml.MappingNode:
    """Short mappings of scalars (a request, a message) on one line."""
    flow = all(_scalar(v) for v in value.values()) and len(repr(value)) <= 80
    return dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=flow)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(dict, _dict)
_Dumper.add_representer(list, _list)
# an inline golden vector: hundreds of numbers, in flow style (a few lines, not hundreds)
_Dumper.add_representer(
    embedding_goldens.Vector,
    lambda dumper, value: dumper.represent_sequence(
        "tag:yaml.org,2002:seq", value, flow_style=True
    ),
)


def render(recorded: CaseFileGoldens, source: str) -> str:
    """The new text of the case file."""
    stamp = f"{HEADER} from {source} on {wall_label()}."
    body = yaml.dump(
        recorded.document,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=None,
        allow_unicode=True,
        width=100,
    )
    spaced = body.replace("\n- name:", "\n\n- name:")  # a blank line between cases
    return "\n".join([*recorded.header, stamp, ""]) + "\n" + spaced


def write(recorded: CaseFileGoldens, source: str, out: Path | None = None) -> Path:
    """Write the recorded file (in place unless ``out``), atomically; the path written."""
    target = out or recorded.path
    for golden in recorded.goldens:  # first: the case file names them
        embedding_goldens.write_golden(golden, target)
    write_atomic(target, render(recorded, source))
    return target


async def generate_files(
    paths: list[Path],
    endpoint: Endpoint,
    config: CorrectnessProbe,
    deployment: Mapping[str, Any],
    progress: Callable[[str], None] = lambda _m: None,
) -> list[CaseFileGoldens]:
    """Every file in turn (cases one by one: goldens are recorded alone, not in a batch)."""
    done = []
    for path in paths:
        done.append(await generate_file(path, endpoint, config, deployment, progress))
    return done
