"""The prompts a load test sends: synthetic (exact token lengths, shared prefixes) or a file.

:func:`build` turns a dataset section into :class:`Item` s — prompt text, its measured
input token count and the output length to ask for — seeded, so the same seed gives the
same prompts. :func:`encode` turns items into the wire bytes of one API (its object in
:mod:`testbed.clients.apis` writes the body), once, before the load starts (no JSON encoding
in the hot path): each with its model, the load's ``extra_body`` and the row's own
``headers``/``extra_body`` (:mod:`testbed.probes.shaping`).

A JSONL row may shape its own request: ``model`` (a model or adapter name), ``headers``
(an object; a secret's value as ``${env:NAME}``) and ``extra_body`` (an object merged over
the load's), checked by the rules of :mod:`testbed.config.shaping`.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from testbed.clients.apis import Api, Request
from testbed.clients.http import ConnectionPool
from testbed.config import shaping
from testbed.config.lengths import FixedLength, Length, ListLength, NormalLength, UniformLength
from testbed.config.load import Dataset, FileDataset, SyntheticDataset
from testbed.core.errors import InputError
from testbed.probes.load.tokens import TokenCounter
from testbed.probes.shaping import with_headers

_DEFAULT_OUTPUT = 64  # tokens, when a file gives no output length


@dataclass(frozen=True)
class Item:
    """One prompt: text, its input tokens (client-counted) and the output tokens to ask;
    the model it goes to (None: the load's), and its row's own headers and body fields."""

    prompt: str
    input_tokens: int
    output_tokens: int
    model: str | None = None
    headers: dict[str, str] | None = None
    extra_body: dict[str, Any] | None = None
    #: api embeddings: the batch of prompts one request embeds (:mod:`.embeddings`)
    inputs: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def draw(length: Length, rng: random.Random) -> int:
    """One length (tokens) from a length distribution."""
    if isinstance(length, FixedLength):
        return length.value
    if isinstance(length, UniformLength):
        return rng.randint(length.min, length.max)
    if isinstance(length, NormalLength):
        value = max(length.min, round(rng.gauss(length.mean, length.std)))
        return min(value, length.max) if length.max is not None else value
    assert isinstance(length, ListLength)
    return rng.choice(length.values)


def build(dataset: Dataset, counter: TokenCounter, seed: int, base_dir: Path) -> list[Item]:
    """The items of ``dataset`` (deterministic for a given seed and counter); a file's
    relative path starts at ``base_dir``. Sessions and traces have modules of their own
    (:mod:`.sessions`, :mod:`.trace`): their prompts are not a flat list."""
    rng = random.Random(seed)
    if isinstance(dataset, SyntheticDataset):
        return _synthetic(dataset, counter, rng)
    if not isinstance(dataset, FileDataset):
        raise TypeError(f"dataset kind {dataset.kind!r} is built by its own module")
    return _from_file(dataset, counter, rng, base_dir)


def _synthetic(ds: SyntheticDataset, counter: TokenCounter, rng: random.Random) -> list[Item]:
    lengths = [(draw(ds.input_tokens, rng), draw(ds.output_tokens, rng)) for _ in range(ds.samples)]
    if not ds.prefix_tokens:
        made = counter.make_texts([n for n, _ in lengths], rng)
        return [
            Item(text, count, n_out)
            for (text, count), (_, n_out) in zip(made, lengths, strict=True)
        ]
    prefixes = [text for text, _ in counter.make_texts([ds.prefix_tokens] * ds.prefix_groups, rng)]
    bodies = counter.make_texts([max(1, n - ds.prefix_tokens) for n, _ in lengths], rng)
    texts = [f"{prefixes[i % ds.prefix_groups]} {body}" for i, (body, _) in enumerate(bodies)]
    counts = counter.count_many(texts)  # a merge at the seam can change the sum by one
    return [
        Item(text, count, n_out)
        for text, count, (_, n_out) in zip(texts, counts, lengths, strict=True)
    ]


def _from_file(
    ds: FileDataset, counter: TokenCounter, rng: random.Random, base_dir: Path
) -> list[Item]:
    path = base_dir / ds.path
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise InputError(f"dataset file {str(path)!r} {what}")
    rows = read_rows(path)
    pairs = _sharegpt_pairs(rows) if ds.format == "sharegpt" else _jsonl_pairs(rows, ds.path)
    if ds.shuffle:
        rng.shuffle(pairs)
    if ds.limit is not None:
        pairs = pairs[: ds.limit]
    if not pairs:
        raise InputError(f"dataset file {ds.path!r} has no usable prompts (format {ds.format})")
    items = []
    for prompt, reply_tokens, shape in pairs:
        if ds.output_tokens is not None:
            n_out = draw(ds.output_tokens, rng)
        elif isinstance(reply_tokens, str):
            n_out = max(1, counter.count(reply_tokens))
        else:
            n_out = reply_tokens or _DEFAULT_OUTPUT
        items.append(Item(prompt, counter.count(prompt), n_out, **shape))
    return items


def read_rows(path: Path) -> list[Any]:
    """The rows of a JSON array or JSON-lines file (sessions and traces read theirs so too);
    an unreadable file or a bad line is the user's error, naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text ({exc.reason})"
        raise InputError(f"dataset file {path}: cannot read it: {reason}") from None
    if text.lstrip().startswith("["):
        return _json_array(path, text)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            except RecursionError:
                raise InputError(f"{path}:{number}: JSON nested too deep") from None
    return rows


def _json_array(path: Path, text: str) -> list[Any]:
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deep") from None
    return rows if isinstance(rows, list) else []


_Pair = tuple[str, int | str | None, dict[str, Any]]


def _jsonl_pairs(rows: list[Any], name: str) -> list[_Pair]:
    pairs: list[_Pair] = []
    for number, row in enumerate(rows, 1):
        prompt = row.get("prompt", row.get("text")) if isinstance(row, dict) else row
        if not isinstance(prompt, str):
            raise InputError(f"{name}: row {number} has no string 'prompt' field")
        out = row.get("output_tokens", row.get("max_tokens")) if isinstance(row, dict) else None
        shape = _row_shape(row, f"{name}: row {number}") if isinstance(row, dict) else {}
        pairs.append((prompt, int(out) if out else None, shape))
    return pairs


def _row_shape(row: dict[str, Any], where: str) -> dict[str, Any]:
    """A row's own ``model``, ``headers`` and ``extra_body``, checked as the load's are."""
    shape: dict[str, Any] = {}
    model = row.get("model")
    if model is not None:
        if not isinstance(model, str) or not model:
            raise InputError(f"{where}: 'model' must be a model name (a string)")
        shape["model"] = model
    for key, problem_of in (
        ("headers", shaping.headers_problem),
        ("extra_body", shaping.extra_body_problem),
    ):
        value = row.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise InputError(f"{where}: '{key}' must be an object")
        problem = problem_of(value)
        if problem is not None:
            raise InputError(f"{where}: {problem}")
        shape[key] = value
    return shape


def _sharegpt_pairs(rows: list[Any]) -> list[_Pair]:
    """First human turn and the model's reply to it, from ShareGPT ``conversations``
    (``from``/``value``) or ``messages`` (``role``/``content``)."""
    pairs: list[_Pair] = []
    for row in rows:
        turns = row.get("conversations") or row.get("messages") if isinstance(row, dict) else None
        if not isinstance(turns, list) or len(turns) < 2:
            continue
        texts = [(t.get("from", t.get("role")), t.get("value", t.get("content"))) for t in turns]
        if texts[0][0] in ("human", "user") and isinstance(texts[0][1], str):
            reply = texts[1][1] if isinstance(texts[1][1], str) else None
            pairs.append((texts[0][1], reply, {}))
    return pairs


def request_of(item: Item, api: Api, model: str, *, ignore_eos: bool) -> Request:
    """What ``item`` asks, for ``api``: its prompt (an embeddings batch's inputs), output
    tokens, model; exact lengths when ``ignore_eos`` and the API has a way to ask them."""
    exact = True if ignore_eos and api.exact_lengths else None
    return Request(
        item.prompt,
        inputs=item.inputs,
        model=model,
        max_tokens=item.output_tokens,
        ignore_eos=exact,
    )


def encode(
    items: list[Item],
    pool: ConnectionPool,
    *,
    api: Api,
    model: str,
    stream: bool,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None = None,
) -> list[bytes]:
    """The wire bytes of every item for ``api``: its model (``model`` when it names none),
    ``extra_body`` and then its row's own fields merged into the body, its row's headers."""
    out = []
    for item in items:
        body = api.body(request_of(item, api, item.model or model, ignore_eos=ignore_eos))
        body = api.merge(body, extra_body or {}, item.extra_body or {})
        if item.headers and api.grpc:
            raise InputError(
                "a dataset row's headers need an HTTP api: TGIS's metadata is the"
                " channel's (load.headers sends it with every call)"
            )
        payload = api.encode(pool, body, stream=stream)
        out.append(with_headers(payload, item.headers) if item.headers else payload)
    return out
