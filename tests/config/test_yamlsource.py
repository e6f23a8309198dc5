"""The YAML reader refuses alias bombs, recursive aliases and absurd nesting at the line at
fault, and still reads ordinary anchors, aliases and merge keys."""

from __future__ import annotations

import pytest

from testbed.config.yamlsource import (
    ALIAS_BUDGET,
    MAX_DEPTH,
    parse_yaml,
    safe_load,
    safe_load_all,
)
from testbed.core.errors import CampaignError


def bomb(levels: int, width: int) -> str:
    """``levels`` lists, each ``width`` aliases of the one before: width**levels leaves."""
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_ordinary_anchors_aliases_and_merge_keys_still_read() -> None:
    text = (
        "base: &base {server: sim, params: {max_batch_size: 4}}\n"
        "one: *base\n"
        "two:\n"
        "  <<: *base\n"
        "  server: hf\n"
    )
    data, prov = parse_yaml(text, "f.yaml")
    assert data["one"] == {"server": "sim", "params": {"max_batch_size": 4}}
    assert data["two"] == {"server": "hf", "params": {"max_batch_size": 4}}
    assert prov.values[("two", "server")].line == 5


@pytest.mark.parametrize("reader", [parse_yaml, safe_load, safe_load_all])
def test_an_alias_bomb_is_refused_at_the_alias_that_crosses_the_budget(reader: object) -> None:
    with pytest.raises(CampaignError) as refused:
        reader(bomb(7, 9), "bomb.yaml")  # type: ignore[operator]
    message = str(refused.value)
    # *a3 in line 5 is where the running count (9*10 + 9*91 + 9*820 + …) passes 10,000
    assert message.startswith("bomb.yaml:5:")
    assert "alias *a3" in message
    assert f"{ALIAS_BUDGET:,}" in message


def test_the_budget_counts_nodes_not_aliases() -> None:
    """Many small aliases pass; the same count of large ones does not."""
    small = "v: &v 1\nlist: [" + ", ".join(["*v"] * (ALIAS_BUDGET - 1)) + "]\n"
    data, _ = parse_yaml(small, "f.yaml")
    assert len(data["list"]) == ALIAS_BUDGET - 1
    big = "v: &v [" + ", ".join(["1"] * 99) + "]\nlist: [" + ", ".join(["*v"] * 101) + "]\n"
    with pytest.raises(CampaignError, match=r"f.yaml:2:\d+: alias \*v repeats 100 nodes"):
        parse_yaml(big, "f.yaml")


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n"])
def test_a_recursive_alias_is_refused(text: str) -> None:
    with pytest.raises(CampaignError, match=r"f.yaml:1:\d+: alias \*a is inside the node"):
        parse_yaml(text, "f.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "name: " + "[" * 5000 + "]" * 5000,  # flow lists
        "".join("  " * i + f"k{i}:\n" for i in range(2000)),  # block mappings
    ],
)
def test_deep_nesting_is_refused_before_python_recursion_runs_out(text: str) -> None:
    with pytest.raises(CampaignError, match=f"nested more than {MAX_DEPTH} levels"):
        parse_yaml(text, "f.yaml")
    with pytest.raises(CampaignError, match=f"nested more than {MAX_DEPTH} levels"):
        safe_load(text, "f.yaml")


def test_a_set_value_names_its_column_and_the_hint() -> None:
    with pytest.raises(CampaignError) as refused:
        safe_load("[1", "--set a=[1", " — quote it")
    assert str(refused.value) == (
        "--set a=[1: the value is not valid YAML (expected ',' or ']', but got"
        " '<stream end>', column 3) — quote it"
    )


def test_a_key_written_twice_is_refused_but_may_override_a_merged_one() -> None:
    with pytest.raises(CampaignError, match=r"f\.yaml:3:1: duplicate key 'a'"):
        parse_yaml("a: 1\nb: 2\na: 3\n", "f.yaml")
    text = "base: &b {x: 1, y: 2}\nmine: &m {<<: *b, y: 3}\nagain: *m\n"
    data, _ = parse_yaml(text, "f.yaml")  # *m comes back flattened: still no duplicate
    assert data["mine"] == data["again"] == {"x": 1, "y": 3}
