"""The cross-configuration differential over two treatments' records."""

from __future__ import annotations

from typing import Any

from testbed.probes.correctness.differential import differential, differential_summary


def record(
    case: str,
    text: list[str],
    top: list[list[Any]] | None = None,
    *,
    stream: bool = False,
    greedy: bool = True,
    error: Any = None,
) -> dict[str, Any]:
    output: dict[str, Any] = {
        "text": "".join(text),
        "token_texts": text,
        "finish_reason": "length",
        "completion_tokens": len(text),
    }
    if top is not None:
        output["top_logprobs"] = top
    if error is not None:
        output = {"text": "", "error": error}
    return {
        "kind": "case",
        "case": case,
        "protocol": "openai",
        "stream": stream,
        "greedy": greedy,
        "status": "PASS",
        "output": output,
    }


REF = [
    record("same", [" a", " b"]),
    record(
        "tie",
        [" a", " b", " c"],
        [[[" a", -0.1], [" x", -3]], [[" b", -0.70], [" B", -0.72]], [[" c", -0.2], [" d", -2]]],
    ),
    record("real", [" a", " b"], [[[" a", -0.1], [" z", -4.0]], [[" b", -0.1], [" y", -3]]]),
    record(
        "sampled",
        [" a", " b"],
        [[[" a", -0.1], [" q", -0.11]], [[" b", -1], [" r", -2]]],
        greedy=False,
    ),
    record("refused", [], error={"status": 400, "message": "no"}),
    record("only-ref", [" a"]),
    record("same", [" stream"], stream=True),  # twins are not compared
]
OTHER = [
    record("same", [" a", " b"]),
    record(
        "tie",
        [" a", " B", " e"],
        [[[" a", -0.1], [" x", -3]], [[" B", -0.70], [" b", -0.71]], [[" e", -0.2], [" f", -2]]],
    ),
    record("real", [" z", " y"], [[[" z", -0.2], [" a", -3.0]], [[" y", -0.1], [" b", -3]]]),
    record("sampled", [" q", " r"]),
    record("refused", [" a"]),
    record("only-other", [" a"]),
]


def test_divergences_are_classified() -> None:
    found = {d.case: d for d in differential(REF, OTHER, near_tie_nats=0.05)}
    assert set(found) == {"tie", "real", "sampled", "refused"}
    tie = found["tie"]
    assert (tie.kind, tie.index, tie.reference_token, tie.other_token) == (
        "near_tie",
        1,
        " b",
        " B",
    )
    assert tie.margin_nats is not None
    assert abs(tie.margin_nats - 0.01) < 1e-9
    assert tie.reference_continuation == " b c"
    assert tie.other_continuation == " B e"
    real = found["real"]
    assert real.kind == "different"
    assert real.index == 0
    assert real.margin_nats is not None
    assert real.margin_nats > 1
    assert found["sampled"].kind == "unclassified"
    assert found["refused"].kind == "error_mismatch"


def test_summary_counts() -> None:
    summary = differential_summary(REF, OTHER, 0.05)
    assert summary["compared"] == 5
    assert (summary["identical"], summary["near_ties"], summary["different"]) == (1, 1, 1)
    assert summary["only_reference"] == ["only-ref/openai"]
    assert summary["only_other"] == ["only-other/openai"]
    assert differential(REF, REF, 0.05) == []


def test_run_differentials_pair_every_treatment_with_the_reference() -> None:
    from testbed.probes.correctness.differential import TreatmentRecords, run_differentials

    runs = [
        TreatmentRecords("001__ref", "ref", REF),
        TreatmentRecords("002__bf16", "bf16", OTHER),
        TreatmentRecords("003__same", "same", REF),
    ]
    found = run_differentials(runs, "ref", 0.05)
    assert set(found) == {"002__bf16", "003__same"}
    assert found["002__bf16"]["near_ties"] == 1
    assert found["003__same"]["divergences"] == []
    assert found["003__same"]["reference"] == "001__ref"
    assert run_differentials(runs, "missing", 0.05) == {}
