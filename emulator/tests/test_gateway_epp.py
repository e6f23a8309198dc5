"""The stand-in EPP's plugins (``standins/gateway/epp.py``) against the rules in its docstring:
scores from the pods' metrics, prefix affinity from its own index, and configurations refused
with the plugin named."""

from __future__ import annotations

import pytest

from kubemu.standins.gateway.epp import (
    Endpoint,
    EppConfigError,
    KvCacheScorer,
    LoadAwareScorer,
    PrefixCacheScorer,
    QueueScorer,
    parse_config,
)
from kubemu.standins.gateway.scrape import interval_from_args, read_metrics

HEAD = "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\n"


def pods(*waiting: float, kv: tuple[float, ...] = ()) -> list[Endpoint]:
    kv = kv or (0.0,) * len(waiting)
    return [
        Endpoint(f"p{i}", f"127.0.0.1:{i}", waiting=w, kv_usage=k)
        for i, (w, k) in enumerate(zip(waiting, kv, strict=True))
    ]


def test_queue_scorer_normalises_between_the_shortest_and_longest_queue() -> None:
    assert QueueScorer().score("", pods(0, 5, 10)) == [1.0, 0.5, 0.0]
    assert QueueScorer().score("", pods(3, 3)) == [1.0, 1.0]


def test_kv_cache_and_load_aware_scores() -> None:
    assert KvCacheScorer().score("", pods(0, 0, kv=(0.25, 1.0))) == [0.75, 0.0]
    assert LoadAwareScorer(threshold=10).score("", pods(0, 5, 20)) == [0.5, 0.25, 0.0]


def test_prefix_scorer_scores_the_leading_blocks_it_routed_and_forgets_beyond_capacity() -> None:
    scorer = PrefixCacheScorer(block_chars=4, max_blocks=256, capacity=3)
    a, b = pods(0, 0)
    scorer.picked("aaaabbbbcccc", a)
    assert scorer.score("aaaabbbbdddd", [a, b]) == [pytest.approx(2 / 3), 0.0]
    scorer.picked("xxxxyyyy", a)  # a's index holds 3 blocks: the oldest go first
    assert scorer.score("aaaabbbbcccc", [a])[0] < 2 / 3
    assert scorer.score("xxxxyyyy", [a]) == [1.0]


def test_prefix_aware_configuration_keeps_a_group_on_one_pod() -> None:
    picker = parse_config(
        HEAD + "plugins:\n- type: prefix-cache-scorer\n  parameters: {blockSize: 2}\n"
        "- type: max-score-picker\nschedulingProfiles:\n- name: default\n  plugins:\n"
        "  - pluginRef: prefix-cache-scorer\n    weight: 2\n  - pluginRef: max-score-picker\n",
        seed=1,
    )
    endpoints = pods(0, 0, 0, 0)
    prefix = "shared system prompt " * 10
    chosen = {picker.pick(f"{prefix} question {i}", endpoints).name for i in range(20)}  # type: ignore[union-attr]
    assert len(chosen) == 1


def test_random_picker_and_default_profile() -> None:
    picker = parse_config(HEAD + "plugins:\n- type: random-picker\n", seed=3)
    seen = {picker.pick("x", pods(0, 0, 0)).name for _ in range(60)}  # type: ignore[union-attr]
    assert seen == {"p0", "p1", "p2"}
    least = parse_config(HEAD + "plugins:\n- type: queue-scorer\n", seed=3)  # max-score-picker
    assert {least.pick("x", pods(4, 0, 9)).name for _ in range(10)} == {"p1"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("plugins:\n- type: session-affinity-scorer\n", "session-affinity-scorer"),
        (
            "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins: []\n"
            "- name: b\n  plugins: []\n",
            "2 scheduling profiles",
        ),
        (
            "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n"
            "  - pluginRef: nope\n",
            "'nope'",
        ),
        ("kind: Deployment\n", "EndpointPickerConfig"),
    ],
)
def test_configurations_the_stand_in_cannot_play_are_refused(text: str, named: str) -> None:
    body = text if text.startswith("kind:") else HEAD + text
    with pytest.raises(EppConfigError, match=named):
        parse_config(body)


def test_metrics_and_refresh_interval_are_read_as_the_epp_reads_them() -> None:
    endpoint = Endpoint("p", "127.0.0.1:1")
    read_metrics(
        'vllm:num_requests_waiting{model_name="m"} 3\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 0.5\n'
        'vllm:num_requests_running{model_name="m"} 7.0\n'
        'vllm:prompt_tokens_total{model_name="m"} 9\n',
        endpoint,
    )
    assert (endpoint.waiting, endpoint.running, endpoint.kv_usage) == (3.0, 7.0, 0.5)
    assert interval_from_args(["--refresh-metrics-interval=200ms"]) == pytest.approx(0.2)
    assert interval_from_args(["--refresh-metrics-interval", "1s"]) == 1.0
    assert interval_from_args([]) == 0.05
