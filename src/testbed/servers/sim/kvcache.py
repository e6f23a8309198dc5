"""The simulator's KV cache: a block pool with vLLM's prefix caching and LRU eviction.

Switched on by ``kv_cache_tokens`` (the capacity, in tokens); ``block_size`` tokens make a
block, so the pool has ``kv_cache_tokens // block_size`` blocks. A request admitted holds
``ceil((prompt + output tokens) / block_size)`` blocks until it ends — the whole generation is
reserved at admission (the simulator knows its output length), where vLLM grows a request
block by block and preempts when it runs out; both make a full cache hold requests back.
A request that does not fit waits in the queue, first come first served: nobody behind it
is admitted before it (vLLM's FCFS scheduler stops at the first request it cannot place).

With ``prefix_caching``, each *full* block of the prompt is named by a hash chained over the
blocks before it (as vLLM names blocks), and a finished request's named blocks stay in the
pool as a cache. A new request reuses the longest run of its leading blocks already there —
its *cached tokens*, which skip prefill (see :mod:`testbed.servers.sim.latency`). At most
``(prompt_tokens - 1) // block_size`` blocks can hit: as in vLLM, the last prompt token is
always computed, to produce the first output token's logits. When a request ends, the full
blocks its answer filled are named too (chained on after its prompt's, over the text the
next turn of a conversation starts with: the prompt, then the answer — a chat prompt names
the assistant's role between them) and stay cached: vLLM caches every full block it
computed, so a conversation's next turn finds its whole history, answers included.
Cached blocks nobody holds are
free to take: when a request needs more blocks than the never-used pool has, the least
recently used of them are evicted (a released request's blocks are queued tail first, so a
prefix outlives its suffixes).

``usage`` is vLLM's ``kv_cache_usage_perc``: blocks held by running requests / all blocks
(cached blocks that nobody holds count as free).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field


def pieces_of(text: str, rule: str) -> list[str]:
    """The token pieces the simulator's rule cuts ``text`` into (words, or 4 characters)."""
    if rule == "whitespace":
        return text.split()
    return [text[i : i + 4] for i in range(0, len(text), 4)]


def block_hashes(pieces: list[str], block_size: int, limit: int) -> list[int]:
    """Chained hashes of the first ``limit`` full blocks of the token pieces.

    Block *i*'s hash covers its own tokens and block *i-1*'s hash, so equal hashes mean equal
    prefixes. Python's string hash is salted per process; the cache lives in one process.
    """
    out: list[int] = []
    parent = 0
    for start in range(0, min(limit, len(pieces) // block_size) * block_size, block_size):
        parent = hash((parent, *pieces[start : start + block_size]))
        out.append(parent)
    return out


@dataclass(slots=True)
class Allocation:
    """The blocks one running request holds: named (cached) ones and plain ones."""

    named: list[int] = field(default_factory=list)
    plain: int = 0
    cached_tokens: int = 0


class KvCache:
    """A pool of ``capacity_tokens // block_size`` blocks (see the module docstring)."""

    def __init__(self, capacity_tokens: int, block_size: int) -> None:
        self.block_size = block_size
        self.total_blocks = capacity_tokens // block_size
        #: Blocks nobody holds, cached ones included.
        self.free_blocks = self.total_blocks
        self._refs: dict[int, int] = {}  # named block -> requests holding it
        self._lru: OrderedDict[int, None] = OrderedDict()  # named blocks nobody holds

    @property
    def usage(self) -> float:
        """Fraction of blocks held by running requests (0..1)."""
        return 1.0 - self.free_blocks / self.total_blocks if self.total_blocks else 0.0

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def allocate(self, hashes: list[int], tokens: int) -> Allocation | None:
        """Hold the blocks of a request of ``tokens`` tokens whose prompt's full blocks are
        ``hashes``; None (nothing changed) when they do not fit now."""
        refs, lru = self._refs, self._lru
        hit = 0
        for h in hashes:
            if h not in refs:
                break
            hit += 1
        needed = self.blocks_for(tokens)
        idle_hits = sum(1 for h in hashes[:hit] if refs[h] == 0)
        if needed - hit + idle_hits > self.free_blocks:
            return None
        alloc = Allocation(cached_tokens=hit * self.block_size)
        for h in hashes[:hit]:
            if refs[h] == 0:
                del lru[h]
            refs[h] += 1
        self.free_blocks -= needed - hit + idle_hits
        # Blocks taken beyond the never-used ones come from evicting idle cached blocks.
        never_used = self.free_blocks + (needed - hit) - len(lru)
        for _ in range(max(0, (needed - hit) - never_used)):
            gone, _ = lru.popitem(last=False)
            del refs[gone]
        named = hashes[:hit]
        for h in hashes[hit:]:
            if h in refs:  # the same block already cached after a gap: a plain copy
                alloc.plain += 1
            else:
                refs[h] = 1
                named.append(h)
        alloc.named = named
        alloc.plain += needed - len(hashes)  # output and the prompt's partial last block
        return alloc

    def release(self, alloc: Allocation, answer: list[int] | None = None) -> None:
        """The request ended: its blocks are free, its named blocks stay cached (LRU), and
        so do ``answer``'s: the chained hashes of the full blocks after its prompt's, at
        most as many as the plain blocks it held (blocks already cached are not copied)."""
        refs, lru = self._refs, self._lru
        freed = alloc.plain
        kept = [h for h in answer or () if h not in refs][: alloc.plain]
        for h in reversed(kept):  # the tail first, so it is evicted first
            refs[h] = 0
            lru[h] = None
        for h in reversed(alloc.named):  # the tail first, so it is evicted first
            refs[h] -= 1
            if refs[h] == 0:  # a block others still hold stays held
                lru[h] = None
                freed += 1
        self.free_blocks += freed
