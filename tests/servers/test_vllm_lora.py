"""LoRA adapters on vLLM (issue 37): the adapter's flags as vLLM 0.32 reads them
(``--enable-lora --lora-modules name=path …``, its LoRAParserAction), refused twice, and the
emulator's vLLM stand-in serving the adapters' names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kubefacts import vllm_argv
from kubemu.standins.vllm_sim import vllm_sim_stand_in
from testbed.config.deployments import VllmParams
from testbed.servers.adapters.vllm import VllmAdapter


def test_lora_modules_become_vllms_flags() -> None:
    params = VllmParams(lora_modules={"sql": "/adapters/sql", "chat": "/a/c"}, max_loras=2)
    argv = VllmAdapter().args(params, "/m", 8000, "m")
    at = argv.index("--enable-lora")
    assert argv[at : at + 6] == [
        "--enable-lora",
        "--lora-modules",
        "sql=/adapters/sql",
        "chat=/a/c",
        "--max-loras",
        "2",
    ]
    line = vllm_argv.read(argv)
    assert line.given["enable_lora"] is True
    assert vllm_argv.lora_names(line.given["lora_modules"]) == ["sql", "chat"]
    assert "--enable-lora" not in VllmAdapter().args(VllmParams(), "/m", 8000, "m")


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"max_loras": 2}, "need lora_modules"),
        ({"lora_modules": {"a": "/p"}, "extra_args": ["--enable-lora"]}, "--enable-lora is in"),
        ({"lora_modules": {"a": "/p"}, "extra_args": ["--lora-modules", "b=/q"]}, "--lora-mod"),
        ({"extra_args": ["--lora-modules", "{not json"]}, "vLLM would refuse"),
    ],
)
def test_a_lora_line_vllm_or_testbed_would_refuse(params: dict[str, object], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        VllmParams.model_validate(params)


def test_the_stand_in_serves_the_adapters() -> None:
    words = ["m", "--enable-lora", "--lora-modules", "a=/p", '{"name": "b", "path": "/q"}']
    argv, _ = vllm_sim_stand_in("py", "vllm/vllm-openai:v0.32.0", ["vllm", "serve"], words)
    assert 'models={"a": {}, "b": {}}' in argv
    argv, note = vllm_sim_stand_in("py", "vllm/vllm-openai:v0.32.0", ["vllm", "serve"],
                                   ["m", "--lora-modules", "a=/p"])  # fmt: skip
    assert not any(part.startswith("models=") for part in argv)
    assert "--lora-modules without --enable-lora" in note
