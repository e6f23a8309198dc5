"""Seeded generator of wrong campaigns for the fuzz test: valid YAML shapes with wrong kinds,
wrong combinations, wrong types, unknown fields, bad references and missing files.

Each campaign starts from a valid document (the shipped examples and a few built here) and
gets one to three mutations. A mutation works on the parsed document, so the file written
is always YAML that parses: what is tested is the validation, not the YAML parser.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

Doc = dict[str, Any]
Path = tuple[str | int, ...]

JUNK: tuple[Any, ...] = (
    "",
    "x",
    -1,
    0,
    3.5,
    True,
    None,
    [],
    {},
    [1, "a"],
    {"a": 1},
    10**12,
    "1e3",
    "${env:TESTBED_FUZZ_NOPE}",
    -0.5,
)
TAGS = (
    "sim", "hf", "vllm", "tgi", "tgis", "external", "local", "kubernetes", "synthetic",
    "file", "fixed", "uniform", "normal", "list", "rate", "sweep", "ramp", "chat", "paired",
    "split", "barrier", "sliding", "sequential", "float16", "bfloat16", "auto", "openai",
    "both", "poisson", "gamma", "jsonl", "sharegpt", "exponential", "nope", "Sim", "",
)  # fmt: skip
TAG_KEYS = (
    "server", "kind", "profile", "strategy", "backend", "protocol", "api", "mode", "arrival",
    "format", "distribution", "similarity", "deployment_framework", "dtype", "tokenizer",
)  # fmt: skip
UNKNOWN_KEYS = ("dtpye", "concurency", "foo", "servr", "param", "kind", "url", "tls", "rate")

EXTRA_BASES: tuple[Doc, ...] = (
    {
        "name": "remote",
        "backend": "external",
        "deployments": [
            {
                "name": "a",
                "server": "external",
                "url": "https://127.0.0.1:1",
                "tls": {"verify": False},
            },
            {"name": "b", "server": "external", "url": "http://127.0.0.1:2", "protocol": "tgi"},
        ],
        "load": {"profile": "rate", "rate": 5, "duration_s": 2, "api": "tgi"},
        "ab": {"stable": "a", "canary": "b", "requests": 10},
    },
    {
        "name": "matrix",
        "deployments": [
            {"name": "s", "server": "sim", "params": {"itl_ms": 1, "max_concurrency": 4}},
            {"name": "t", "extends": "s", "params": {"max_waiting": 2}},
            {"name": "v", "server": "vllm", "model": "bundled:smollm2-135m"},
        ],
        "matrix": {
            "factors": {
                "load.concurrency": [1, 2],
                "load.rate": [None, 5],
                "deployments.s.params.itl_ms": [1, 2],
            },
            "zip": [["load.concurrency", "load.rate"]],
            "exclude": [{"load.concurrency": 2, "deployments.s.params.itl_ms": 2}],
        },
        "load": {
            "deployments": ["s", "t"],
            "requests": 4,
            "dataset": {"input_tokens": {"kind": "uniform", "min": 4, "max": 8}},
            "slo": {"ttft_p99_ms": 100},
        },
        "execution": {"strategy": "barrier", "max_parallel": 2, "unroll": ["load.concurrency"]},
        "presets": {"quick": {"load.requests": 2}},
        "results": {"thresholds": {"ttft_ms.p99": "10%"}},
    },
)


def _paths(node: Any, prefix: Path = ()) -> list[tuple[Path, Any]]:
    """Every (path, value) in the document, containers included, root excluded."""
    out: list[tuple[Path, Any]] = []
    items: list[tuple[str | int, Any]] = []
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = list(enumerate(node))
    for key, value in items:
        out.append(((*prefix, key), value))
        out += _paths(value, (*prefix, key))
    return out


def _parent(doc: Doc, path: Path) -> Any:
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    return node


def _set(doc: Doc, path: Path, value: Any) -> None:
    _parent(doc, path)[path[-1]] = value


def type_swap(doc: Doc, rng: random.Random) -> None:
    path, _ = rng.choice(_paths(doc))
    _set(doc, path, copy.deepcopy(rng.choice(JUNK)))


def unknown_key(doc: Doc, rng: random.Random) -> None:
    maps = [v for _, v in _paths(doc) if isinstance(v, dict)] + [doc]
    rng.choice(maps)[rng.choice(UNKNOWN_KEYS)] = rng.choice(JUNK[:6])


def drop_key(doc: Doc, rng: random.Random) -> None:
    keys = [p for p, _ in _paths(doc) if isinstance(p[-1], str)]
    del _parent(doc, (path := rng.choice(keys)))[path[-1]]


def wrong_kind(doc: Doc, rng: random.Random) -> None:
    spots = [p for p, _ in _paths(doc) if p[-1] in TAG_KEYS]
    if spots:
        _set(doc, rng.choice(spots), rng.choice(TAGS))
    else:
        doc["backend"] = rng.choice(TAGS)


def bad_reference(doc: Doc, rng: random.Random) -> None:
    ghost = rng.choice(["ghost", "", "A", 7])
    deployments = doc.get("deployments") or [{}]
    choices: list[Callable[[], None]] = [
        lambda: doc.setdefault("ab", {"stable": "x", "canary": "y"}).update(stable=ghost),
        lambda: doc.setdefault("correctness", {"cases": ["cases/sim.yaml"]}).update(
            reference=ghost
        ),
        lambda: doc.setdefault("load", {"requests": 1}).update(deployments=[ghost]),
        lambda: rng.choice(deployments).update(extends=ghost),
        lambda: (
            doc.setdefault("matrix", {})
            .setdefault("factors", {})
            .update(
                {rng.choice(["load.nope", "deployments.ghost.params.dtype", "x", "a..b"]): [1, 2]}
            )
        ),
        lambda: doc.setdefault("matrix", {"factors": {"load.concurrency": [1]}}).update(
            zip=[["load.concurrency", "load.ghost"]]
        ),
        lambda: doc.setdefault("execution", {}).update(unroll=["load.ghost"]),
        lambda: doc.setdefault("correctness", {}).update(cases=["missing-cases.yaml"]),
        lambda: doc.setdefault("load", {"requests": 1}).update(
            dataset={"kind": "file", "path": "missing.jsonl"}
        ),
        lambda: doc.setdefault("ab", {"stable": "a", "canary": "b"}).update(
            prompts="missing.jsonl"
        ),
    ]
    rng.choice(choices)()


def _deployment(doc: Doc, rng: random.Random) -> Doc:
    deployments = doc.setdefault("deployments", [])
    if not deployments or not isinstance(deployments, list):
        doc["deployments"] = deployments = [{"name": "d", "server": "sim"}]
    chosen = rng.choice(deployments)
    return chosen if isinstance(chosen, dict) else {}


def wrong_combination(doc: Doc, rng: random.Random) -> None:
    d = _deployment(doc, rng)
    real = {"server": rng.choice(["hf", "vllm"]), "model": "bundled:smollm2-135m"}
    choices: list[Callable[[], None]] = [
        lambda: d.update(server=rng.choice(["tgi", "tgis"]), model="m"),
        lambda: doc.update(backend="external"),
        lambda: d.update(server="external", url="http://h:1", tls={"ca_bundle": "ca.pem"}),
        lambda: d.update(server="external", url="https://h:1", tls={"ca_bundle": "no.pem"}),
        lambda: d.update(**real, params={"tensor_parallel": 2}),
        lambda: d.update(**real, resources={"gpu": 2}),
        lambda: d.update(**real, params={"dtype": "float16"}),
        lambda: d.update(server="tgi", params={"flash_attention": True}),
        lambda: d.update(server="sim", params={"max_waiting": 3}),
        lambda: doc.update(load={"profile": "rate", "requests": 3}),
        lambda: doc.update(load={"duration_s": 1, "warmup_s": 1}),
        lambda: doc.update(load={"profile": "ramp", "requests": 5}),
        lambda: doc.update(load={"profile": "ramp", "duration_s": None, "requests": 2}),
        lambda: doc.update(load={"requests": 2, "dataset": {"input_tokens": {"kind": "uniform",
                                                                           "min": 9, "max": 2}}}),
        lambda: doc.update(ab={"stable": d.get("name"), "canary": d.get("name")}),
        lambda: doc.update(deployments=[*doc["deployments"], copy.deepcopy(d)]),
        lambda: [doc.pop(k, None) for k in ("correctness", "load", "ab", "scale")],
        lambda: doc.update(deployments=[]),
        lambda: doc.update(matrix={}),
        lambda: doc.update(ab={"stable": "a", "canary": "b", "criteria": dict.fromkeys(
            ("min_agreement", "max_ttft_p50_regression", "max_error_rate_increase"))}),
    ]  # fmt: skip
    rng.choice(choices)()


MUTATIONS: tuple[Callable[[Doc, random.Random], None], ...] = (
    type_swap,
    unknown_key,
    drop_key,
    wrong_kind,
    bad_reference,
    wrong_combination,
)


def campaigns(bases: list[Doc], count: int, seed: int) -> list[tuple[str, Doc]]:
    """``count`` mutated documents, each with a label naming its base and mutations."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        base_index = rng.randrange(len(bases))
        doc = copy.deepcopy(bases[base_index])
        names = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            mutation = rng.choice(MUTATIONS)
            if not isinstance(doc, dict) or not doc:
                break
            try:
                mutation(doc, rng)
            except (KeyError, IndexError, TypeError, AttributeError, ValueError):
                continue  # the document's shape no longer fits this mutation: skip it
            names.append(mutation.__name__)
        out.append((f"base {base_index}: {', '.join(names)}", doc))
    return out
