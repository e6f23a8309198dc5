"""vLLM's command line as vLLM reads it (``config/vllm_argv.py``): aliases, both spellings of a
value, its defaults by platform, values it refuses, flags it does not know."""

from __future__ import annotations

import pytest

from kubefacts.vllm_argv import VllmArgvError, read, server_words


def test_aliases_underscores_and_both_value_spellings_read_alike() -> None:
    one = read(["M", "-tp", "2", "--max_num_seqs=64", "--device-memory-utilization", "0.5"])
    two = read(["--model=M", "--tensor-parallel-size=2", "--max-num-seqs", "64",
                "--gpu_memory_utilization=0.5"])  # fmt: skip
    assert (
        one.given
        == two.given
        == {
            "model": "M",
            "tensor_parallel_size": 2,
            "max_num_seqs": 64,
            "gpu_memory_utilization": 0.5,
        }
    )


def test_defaults_are_vllms_prefix_caching_on_and_block_size_by_platform() -> None:
    line = read(["Qwen/Qwen3-0.6B"])
    assert line.value("enable_prefix_caching") is True  # V1 caches unless told not to
    assert line.value("block_size", "gpu") == 16
    assert line.value("block_size", "cpu") == 128
    assert line.value("max_num_seqs", "gpu") == 256
    assert read(["M", "-tp", "2"]).value("max_num_seqs", "cpu") == 256  # 128 per rank
    assert line.value("gpu_memory_utilization") == 0.92
    assert line.value("port") == 8000
    assert line.served_name == "Qwen/Qwen3-0.6B"
    assert read([]).served_name == "Qwen/Qwen3-0.6B"  # vLLM's own default model


def test_the_boolean_pair_and_the_last_value_wins() -> None:
    assert read(["--no-enable-prefix-caching"]).value("enable_prefix_caching") is False
    both = read(["--no-enable-prefix-caching", "--enable-prefix-caching", "--port", "1",
                 "--port=2"])  # fmt: skip
    assert both.value("enable_prefix_caching") is True
    assert both.value("port") == 2


def test_served_names_take_several_words_and_the_first_is_reported() -> None:
    line = read(["M", "--served-model-name", "a", "b", "--port", "9"])
    assert line.served_name == "a"
    assert line.value("served_model_name") == ["a", "b"]
    assert line.value("port") == 9


def test_human_readable_counts_and_auto_length() -> None:
    assert read(["--max-model-len", "32k"]).value("max_model_len") == 32000
    assert read(["--max-model-len=32K"]).value("max_model_len") == 32768
    assert read(["--max-model-len", "auto"]).value("max_model_len") == -1
    assert read(["--max-model-len", "-1"]).value("max_model_len") == -1


def test_unknown_flags_are_kept_with_their_values() -> None:
    line = read(["M", "--kv-transfer-config", "{}", "--swap-space=4", "--disable-frontend-mp",
                 "--port", "8000"])  # fmt: skip
    assert line.unknown == ("--kv-transfer-config {}", "--swap-space=4", "--disable-frontend-mp")
    assert line.value("port") == 8000


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        (["--max-num-seqs", "lots"], "argument --max-num-seqs: invalid value: 'lots'"),
        (["--port"], "argument --port: expected one argument"),
        (["--enable-prefix-caching=false"], "ignored explicit argument 'false'"),
        (["A", "B"], "unrecognized arguments: B"),
    ],
)
def test_a_line_vllm_refuses_is_refused_with_its_reason(words: list[str], reason: str) -> None:
    with pytest.raises(VllmArgvError, match=reason):
        read(words)


def test_server_words_after_either_entry_point() -> None:
    assert server_words(["vllm", "serve"], ["M", "--port=1"]) == ["M", "--port=1"]
    python_m = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert server_words(python_m, ["--model", "M"]) == ["--model", "M"]
    assert server_words([], ["--model", "M"]) == ["--model", "M"]  # the image's entry point
