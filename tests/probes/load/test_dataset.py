"""Prompts: exact synthetic lengths, shared prefixes, files, seeds and token counters."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from testbed.clients.apis import APIS
from testbed.config.load import FileDataset, SyntheticDataset
from testbed.core.errors import InputError
from testbed.probes.load import dataset
from testbed.probes.load.tokens import HfCounter, RuleCounter, counter_from_spec


@pytest.mark.parametrize("rule", ["whitespace", "chars4"])
def test_synthetic_lengths_are_exact(rule: str) -> None:
    counter = RuleCounter(rule)
    ds = SyntheticDataset(input_tokens=37, output_tokens=[5, 9], samples=50)
    items = dataset.build(ds, counter, seed=1, base_dir=Path())
    assert len(items) == 50
    assert {item.input_tokens for item in items} == {37}
    assert {counter.count(item.prompt) for item in items} == {37}
    assert {item.output_tokens for item in items} <= {5, 9}


def test_distributions_stay_in_bounds_and_seed_reproduces() -> None:
    ds = SyntheticDataset.model_validate(
        {
            "input_tokens": {"kind": "uniform", "min": 10, "max": 20},
            "output_tokens": {"kind": "normal", "mean": 50, "std": 30, "min": 2, "max": 80},
            "samples": 300,
        }
    )
    counter = RuleCounter()
    items = dataset.build(ds, counter, seed=5, base_dir=Path())
    assert all(10 <= item.input_tokens <= 20 for item in items)
    assert all(2 <= item.output_tokens <= 80 for item in items)
    assert len({item.input_tokens for item in items}) == 11
    assert items == dataset.build(ds, counter, seed=5, base_dir=Path())
    assert items != dataset.build(ds, counter, seed=6, base_dir=Path())


def test_shared_prefix_groups() -> None:
    ds = SyntheticDataset(input_tokens=30, prefix_tokens=10, prefix_groups=3, samples=9)
    items = dataset.build(ds, RuleCounter(), seed=1, base_dir=Path())
    prefixes = [" ".join(item.prompt.split()[:10]) for item in items]
    assert len(set(prefixes)) == 3
    assert prefixes[0] == prefixes[3] == prefixes[6]
    assert {item.input_tokens for item in items} == {30}


def test_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a b c", "output_tokens": 7}\n\n{"prompt": "d e"}\n')
    ds = FileDataset(kind="file", path=str(path), shuffle=False)
    items = dataset.build(ds, RuleCounter(), seed=0, base_dir=Path())
    assert [(i.prompt, i.input_tokens, i.output_tokens) for i in items] == [
        ("a b c", 3, 7),
        ("d e", 2, 64),
    ]


def test_sharegpt_file(tmp_path: Path) -> None:
    rows = [
        {
            "conversations": [
                {"from": "human", "value": "hi there"},
                {"from": "gpt", "value": "a b c d"},
            ]
        },
        {
            "conversations": [
                {"from": "gpt", "value": "no human first"},
                {"from": "human", "value": "x"},
            ]
        },
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r s"}]},
    ]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(rows))
    ds = FileDataset(kind="file", path=str(path), format="sharegpt", shuffle=False)
    items = dataset.build(ds, RuleCounter(), seed=0, base_dir=Path())
    assert [(i.prompt, i.output_tokens) for i in items] == [("hi there", 4), ("q", 2)]


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    ds = FileDataset(kind="file", path=str(tmp_path / "nope.jsonl"))
    with pytest.raises(InputError, match=r"nope\.jsonl"):
        dataset.build(ds, RuleCounter(), seed=0, base_dir=Path())


def _body(item: dataset.Item, api: str, *, ignore_eos: bool) -> dict[str, Any]:
    return APIS[api].body(dataset.request_of(item, APIS[api], "m", ignore_eos=ignore_eos))


def test_request_bodies() -> None:
    item = dataset.Item("p q", 2, 8)
    assert _body(item, "completions", ignore_eos=True) == {
        "model": "m",
        "max_tokens": 8,
        "prompt": "p q",
        "ignore_eos": True,
    }
    chat = _body(item, "chat", ignore_eos=False)
    assert chat["messages"] == [{"role": "user", "content": "p q"}]
    assert "ignore_eos" not in chat
    # TGI has no way to ask for exact lengths: a load does not send the simulator's extension
    assert _body(item, "tgi", ignore_eos=True) == {
        "inputs": "p q",
        "parameters": {"max_new_tokens": 8},
    }
    tgis = _body(item, "tgis", ignore_eos=True)
    assert tgis["params"] == {"stopping": {"max_new_tokens": 8, "min_new_tokens": 8}}


@pytest.fixture
def tiny_tokenizer(tmp_path: Path) -> Path:
    """A small BPE tokenizer.json trained here (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from testbed.probes.load.tokens import _WORDS

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    rng = random.Random(0)
    corpus = [" ".join(rng.choice(_WORDS) for _ in range(30)) for _ in range(300)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"]))
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    tok.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


def test_hf_counter_makes_exact_lengths(tiny_tokenizer: Path) -> None:
    counter = HfCounter(str(tiny_tokenizer))
    rng = random.Random(1)
    for n in (1, 16, 128):
        assert counter.count(counter.make_text(n, rng)) == n
    again = counter_from_spec(counter.spec())
    assert again.count("time year") == counter.count("time year")


def test_hf_counter_needs_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"tokenizer\.json"):
        HfCounter(str(tmp_path))
