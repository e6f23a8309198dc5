"""From server metric samples and client records to the ``server_metrics`` part of summary.json.

Pure functions, computed once the probe is over. Per deployment:

- gauges (``running``, ``waiting``, ``kv_cache_usage``): mean and max of the samples taken
  inside the steady-state window (all samples when none fell inside it);
- counters (``prompt_tokens``, ``generation_tokens``): the server's count over the whole
  probe = last final sample − the start sample taken before the first request (None when
  the server does not expose it, or when it went down: a restart resets counters);
  ``generation_tokens_per_s`` = the counter's increase across the window / its span;
- ``prefix_cache``: the prompt tokens the server looked up in its prefix cache
  (``queries``) and found there (``hits``) over the whole probe, summed over the
  deployment's pods, and ``hit_rate`` = hits / queries (None without such counters, or
  without a query); ``prefix_cache_hit_rate`` at the top is the same over every deployment;
- the client's counts of the same requests (those that reached the server), and for each
  counter the relative difference ``|server − client| / client``, flagged above
  ``token_mismatch_threshold``.

The server also counts tokens of requests the client gave up on, and the first requests of
a treatment may overlap the previous one's last; a flag is a reason to look, not a verdict.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.config.server_metrics import ServerMetrics
from testbed.results.records import AbRecord

GAUGES = ("running", "waiting", "kv_cache_usage")


@dataclass(frozen=True)
class ClientTokens:
    """The client's token counts of the requests one deployment received."""

    output: int | None  # None: not known (the server gave no usage and nothing was counted)
    prompt: int | None
    prompt_basis: str = "client tokenizer"  # or "server usage", or "estimate"
    output_basis: str = "server usage"  # or "client tokenizer", or "estimate"


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of ``server_metrics.jsonl`` (empty when there is none)."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_client_tokens(records: Iterable[Mapping[str, Any]], *, exact: bool) -> ClientTokens:
    """The load probe's counts: output tokens as recorded (server usage when given, the
    client tokenizer otherwise), prompt tokens from usage when every request has it.
    ``exact``: the client's tokenizer is the model's (else its counts are estimates)."""
    reached = [r for r in records if r.get("status")]
    counted = "client tokenizer" if exact else "estimate"
    used = all(r.get("usage_output_tokens") is not None for r in reached)
    # a record's output_tokens is the client's count; the server's own sits beside it
    field = "usage_output_tokens" if used else "output_tokens"
    output = sum(int(r.get(field) or 0) for r in reached)
    out_basis = "server usage" if used else counted
    usage = [r.get("usage_input_tokens") for r in reached]
    if reached and all(u is not None for u in usage):
        prompt = sum(int(u or 0) for u in usage)
        return ClientTokens(output, prompt, "server usage", out_basis)
    prompt = sum(int(r.get("input_tokens") or 0) for r in reached)
    return ClientTokens(output, prompt, counted, out_basis)


def ab_client_tokens(records: Iterable[AbRecord]) -> ClientTokens:
    """An A/B side's counts: the usage of each answered request (the A/B probe counts no
    tokens itself); unknown when any answered request came without usage."""
    reached = [r for r in records if r["status"]]
    counts = [r["usage_output_tokens"] for r in reached]
    if not reached or any(c is None for c in counts):
        return ClientTokens(None, None)
    return ClientTokens(sum(int(c or 0) for c in counts), None)


def summarise(
    samples: Sequence[Mapping[str, Any]],
    clients: Mapping[str, ClientTokens],
    settings: ServerMetrics,
    window: tuple[int, int] | None = None,
    problems: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``server_metrics`` summary of one treatment."""
    deployments: dict[str, Any] = {}
    flagged: list[str] = []
    for name in dict.fromkeys(str(s["deployment"]) for s in samples):
        mine = [s for s in samples if s["deployment"] == name]
        client = clients.get(name, ClientTokens(None, None))
        part = _deployment(mine, client, settings.token_mismatch_threshold, window)
        deployments[name] = part
        flagged += [f"{name}: {m['message']}" for m in part["mismatch"] if m["flagged"]]
    problems = [*problems, *_not_played(samples)]
    # The first sample's CPU time includes the sampler's start (imports); the rest is scraping.
    cpu = [float(s.get("sampler_cpu_s") or 0.0) for s in samples]
    scraping = (max(cpu) - min(cpu)) if cpu else 0.0
    later = len(samples) - sum(1 for s in samples if s.get("phase") == "start")
    return {
        "file": "server_metrics.jsonl" if samples else None,
        "interval_s": settings.interval_s,
        "token_mismatch_threshold": settings.token_mismatch_threshold,
        "sampler": {
            "scrapes": len(samples),
            "start_cpu_s": round(min(cpu), 4) if cpu else None,
            "cpu_ms_per_scrape": round(scraping * 1e3 / later, 3) if later > 0 else None,
        },
        "deployments": deployments,
        "prefix_cache_hit_rate": _hit_rate(
            [d["prefix_cache"] for d in deployments.values() if d["prefix_cache"]]
        ),
        "flagged": flagged,
        "problems": list(problems),
    }


def _deployment(
    samples: Sequence[Mapping[str, Any]],
    client: ClientTokens,
    threshold: float,
    window: tuple[int, int] | None,
) -> dict[str, Any]:
    ok = [s for s in samples if not s.get("error")]
    failed = [s for s in samples if s.get("error")]
    inside = [s for s in ok if window and window[0] <= s["t_ns"] <= window[1]] or ok
    out: dict[str, Any] = {
        "samples": len(ok),
        "failed_scrapes": len(failed),
        "first_error": failed[0]["error"] if failed else None,
    }
    for gauge in GAUGES:
        values = [float(s[gauge]) for s in inside if s.get(gauge) is not None]
        out[gauge] = (
            {"mean": sum(values) / len(values), "max": max(values), "n": len(values)}
            if values
            else None
        )
    out["prompt_tokens"] = _increase(samples, "prompt_tokens")
    out["generation_tokens"] = _increase(samples, "generation_tokens")
    out["generation_tokens_per_s"] = _rate(ok, "generation_tokens", window)
    queries = _increase(samples, "prefix_cache_queries")
    hits = _increase(samples, "prefix_cache_hits")
    out["prefix_cache"] = (
        {
            "queries": queries,
            "hits": hits,
            "hit_rate": _hit_rate([{"queries": queries, "hits": hits}]),
        }
        if queries is not None and hits is not None
        else None
    )
    out["client"] = {
        "output_tokens": client.output,
        "prompt_tokens": client.prompt,
        "prompt_basis": client.prompt_basis,
    }
    out["mismatch"] = [
        _compare(field, out[field], value, threshold, basis)
        for field, value, basis in (
            ("generation_tokens", client.output, f"output tokens ({client.output_basis})"),
            ("prompt_tokens", client.prompt, f"prompt tokens ({client.prompt_basis})"),
        )
        if out[field] is not None and value is not None
    ]
    return out


def _increase(samples: Sequence[Mapping[str, Any]], field: str) -> float | None:
    """Last final sample − start sample; None when either is missing or the counter was
    reset in between."""
    start = next((s for s in samples if s.get("phase") == "start"), None)
    final = [s for s in samples if s.get("phase") == "final"]
    if start is None or not final or start.get(field) is None or final[-1].get(field) is None:
        return None
    values = [float(s[field]) for s in samples if s.get(field) is not None]
    if any(b < a for a, b in itertools.pairwise(values)):
        return None  # a counter went back: the server restarted in between
    return float(final[-1][field]) - float(start[field])


def _hit_rate(parts: Sequence[Mapping[str, Any]]) -> float | None:
    """Hits / queries summed over ``parts`` (None without a query)."""
    queries = sum(float(p["queries"]) for p in parts)
    return sum(float(p["hits"]) for p in parts) / queries if queries > 0 else None


def _not_played(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    """What stand-ins said they do not play, once per deployment and pod."""
    said: dict[str, None] = {}
    for sample in samples:
        for flags in sample.get("not_played") or []:
            said[f"{sample['deployment']}: {flags} — the stand-in does not play these"] = None
    return list(said)


def _rate(
    ok: Sequence[Mapping[str, Any]], field: str, window: tuple[int, int] | None
) -> float | None:
    points = [(s["t_ns"], s[field]) for s in ok if s.get(field) is not None]
    if window:
        points = [p for p in points if window[0] <= p[0] <= window[1]] or points
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    span_s = (int(points[-1][0]) - int(points[0][0])) / 1e9
    return (float(points[-1][1]) - float(points[0][1])) / span_s


def _compare(field: str, server: float, client: int, threshold: float, what: str) -> dict[str, Any]:
    relative = abs(server - client) / max(client, 1)
    # an estimate (no tokenizer of the model's at hand) is shown but never flagged
    estimate = what.endswith("(estimate)")
    flagged = relative > threshold and not estimate
    message = (
        f"server counted {server:g} {what.split(' (', maxsplit=1)[0]}, the client {client}"
        f"{' (an estimate)' if estimate else ''}"
        f" ({relative:.1%} apart{f', above {threshold:.1%}' if flagged else ''})"
    )
    return {
        "field": field,
        "server": server,
        "client": client,
        "compared_with": what,
        "relative": relative,
        "flagged": flagged,
        "message": message,
    }


def headline(part: Mapping[str, Any]) -> list[str]:
    """Plain-text lines for a terminal: per deployment, the gauges and token counts, then
    each flagged mismatch (prefixed ``MISMATCH``)."""
    lines = []
    for name, d in (part.get("deployments") or {}).items():
        gauges = ", ".join(
            f"{gauge} mean {d[gauge]['mean']:.3g} max {d[gauge]['max']:.3g}"
            for gauge in GAUGES
            if d.get(gauge)
        )
        tokens = "; ".join(m["message"] for m in d.get("mismatch") or []) or "no token counts"
        cache = d.get("prefix_cache") or {}
        rate = cache.get("hit_rate")
        hits = f"; prefix cache hit rate {rate:.1%}" if rate is not None else ""
        lines.append(f"server metrics {name}: {gauges or 'no gauges'}; {tokens}{hits}")
    threshold = float(part.get("token_mismatch_threshold") or 0.0)
    lines += [f"MISMATCH beyond {threshold:.1%}: {flag}" for flag in part.get("flagged") or []]
    lines += [f"server metrics: {problem}" for problem in part.get("problems") or []]
    return lines
