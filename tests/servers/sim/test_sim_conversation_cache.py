"""A conversation's next turn finds its whole history in the simulator's prefix cache: the
blocks an answer filled are cached when it ends (as vLLM caches every full block it
computed), over the text the next turn starts with — for chat, the assistant's message."""

from __future__ import annotations

import asyncio
import json

from testbed.config.sim import SimParams
from testbed.servers.sim import running_sim
from testbed.servers.sim.kvcache import KvCache, block_hashes
from tests.servers.sim.test_sim_kv_cache import _call, metric, words

PARAMS = SimParams(kv_cache_tokens=8192, block_size=16, prefix_caching=True)


def test_an_answers_full_blocks_stay_cached_after_the_prompts() -> None:
    kv = KvCache(capacity_tokens=16 * 10, block_size=16)
    prompt = block_hashes(words("p", 40), 16, limit=(40 - 1) // 16)  # 2 named blocks
    whole = block_hashes(words("p", 40) + words("a", 40), 16, limit=5)  # prompt + answer
    alloc = kv.allocate(prompt, 80)
    assert alloc is not None
    kv.release(alloc, whole[len(prompt) :])
    assert kv.free_blocks == 10  # cached blocks nobody holds are free to take
    again = kv.allocate(whole, 96)
    assert again is not None
    assert again.cached_tokens == 5 * 16  # the prompt's two blocks and the answer's three


def _hits_of_second_turn(path: str, first: dict[str, object], second_of: object) -> float:
    async def scenario(url: str) -> float:
        status, body = await _call(url, "POST", path, first)
        assert status == 200
        answer = json.loads(body)["choices"][0]
        text = answer["message"]["content"] if "message" in answer else answer["text"]
        _, before = await _call(url, "GET", "/metrics")
        status, _ = await _call(url, "POST", path, second_of(text))  # type: ignore[operator]
        assert status == 200
        _, after = await _call(url, "GET", "/metrics")
        name = "vllm:prefix_cache_hits_total"
        return metric(after.decode(), name) - metric(before.decode(), name)

    async def main() -> float:
        async with running_sim(PARAMS) as url:
            return await scenario(url)

    return asyncio.run(main())


def test_a_completions_turn_hits_the_previous_prompt_and_answer() -> None:
    prompt = " ".join(words("q", 40))
    first = {"prompt": prompt, "max_tokens": 40, "ignore_eos": True}
    hits = _hits_of_second_turn(
        "/v1/completions",
        first,
        lambda text: {"prompt": prompt + text + "\n" + " ".join(words("r", 20)), "max_tokens": 2},
    )
    assert hits == 5 * 16  # 80 tokens of history: five full blocks (two before this change)


def test_a_chat_turn_hits_the_previous_messages_and_answer() -> None:
    user = " ".join(words("q", 40))
    first = {"messages": [{"role": "user", "content": user}], "max_tokens": 40, "ignore_eos": True}
    hits = _hits_of_second_turn(
        "/v1/chat/completions",
        first,
        lambda text: {
            "messages": [
                {"role": "user", "content": user},
                {"role": "assistant", "content": text},
                {"role": "user", "content": " ".join(words("r", 20))},
            ],
            "max_tokens": 2,
        },
    )
    assert hits == 5 * 16  # user, 40 words, assistant, 40 words: 82 pieces, five blocks
