"""KServe's images as the emulator's kubelet plays them (``standins/kserve_images.py``,
``standins/kserve_storage.py``): the model server's argv read as its argparse reads it, the
storage initializer's URIs checked in KServe's words, and the webhook's pod mutation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kubemu.kubelet.images import ImageRules
from kubemu.standins.kserve_images import KServeImages
from kubemu.standins.kserve_storage import SOURCE_URI, download, hf_repo, inject

SERVER = "kserve/huggingfaceserver:latest"
PORTS = {8080: 40123}


def played(args: list[str], env: dict[str, str] | None = None,
           mounts: dict[str, str] | None = None) -> tuple[list[str], str]:  # fmt: skip
    return KServeImages()("py", SERVER, [], args, env or {}, PORTS, mounts or {})


def sets(argv: list[str]) -> dict[str, object]:
    return {
        argv[i + 1].split("=", 1)[0]: json.loads(argv[i + 1].split("=", 1)[1])
        for i, word in enumerate(argv)
        if word == "--set"
    }


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_last_model_name_wins_and_openai_lives_under_openai(tmp_path: Path) -> None:
    argv, note = played(["--model_name=qwen-llm", "--model_name=qwen", "--max_model_len", "2048",
                         "--dtype=bfloat16", "--enable-chunked-prefill"],
                        mounts={"/mnt/models": str(tmp_path)})  # fmt: skip
    assert argv[:5] == ["py", "-m", "testbed", "serve", "sim"]
    assert flag(argv, "--model") == "qwen"
    assert flag(argv, "--port") == "40123"  # the pod's 8080, on this host
    assert sets(argv) == {"protocols": ["openai"], "openai_prefix": "/openai",
                          "max_model_len": 2048, "dtype": "bfloat16"}  # fmt: skip
    assert "kserve/huggingfaceserver:latest is played by testbed's simulator" in note
    assert "not played: --enable-chunked-prefill" in note


def test_without_a_model_name_kserves_server_answers_to_model(tmp_path: Path) -> None:
    argv, _ = played([], mounts={"/mnt/models": str(tmp_path)})
    assert flag(argv, "--model") == "model"


def test_vllms_served_model_name_wins_unless_the_backend_is_huggingface(tmp_path: Path) -> None:
    mounts = {"/mnt/models": str(tmp_path)}
    words = ["--model_name=a", "--served-model-name", "b", "--max-num-seqs=4"]
    argv, _ = played(words, mounts=mounts)
    assert flag(argv, "--model") == "b"
    assert sets(argv)["max_concurrency"] == 4
    argv, _ = played([*words, "--backend=huggingface"], mounts=mounts)
    assert flag(argv, "--model") == "a"


def test_the_route_prefix_comes_from_kserves_environment_variable(tmp_path: Path) -> None:
    mounts = {"/mnt/models": str(tmp_path)}
    argv, _ = played([], {"KSERVE_OPENAI_ROUTE_PREFIX": "llm"}, mounts)
    assert sets(argv)["openai_prefix"] == "/llm"
    argv, _ = played([], {"KSERVE_OPENAI_ROUTE_PREFIX": ""}, mounts)
    assert sets(argv)["openai_prefix"] == ""


def test_a_model_from_nowhere_fails_as_kserves_server_does(tmp_path: Path) -> None:
    argv, _ = played(["--model_name=x"], mounts={"/mnt/other": str(tmp_path)})
    done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 1
    assert "No such file or directory: '/mnt/models'" in done.stderr
    argv, _ = played(["--model_id=meta-llama/Meta-Llama-3.1-8B-Instruct"])
    assert argv[3:5] == ["serve", "sim"]  # a hub id needs no storage


def test_the_kubelet_gives_the_server_its_undeclared_port() -> None:
    rules = ImageRules(pod_stand_ins=(KServeImages(),))
    assert rules.family(SERVER) == "pod"
    assert rules.family("docker.io/kserve/storage-initializer:v0.15.0") == "pod"
    assert rules.family("kserve/sklearnserver:latest") == "unknown"
    assert rules.listens(SERVER) == (8080,)
    assert rules.listens("kserve/storage-initializer:latest") == ()


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        (
            "hf://repo_only",
            "Invalid Hugging Face URI format. Expected 'hf://owner/model[:revision]'",
        ),
        ("hf:///model_only", "repository owner cannot be empty"),
        ("hf://owner/", "model name cannot be empty"),
        ("hf://a/b/c", "Invalid Hugging Face URI format"),
    ],
)
def test_a_bad_hf_uri_is_refused_in_kserves_words(uri: str, words: str) -> None:
    with pytest.raises(RuntimeError, match=words.replace("[", r"\[").replace("]", r"\]")):
        hf_repo(uri)


def test_an_hf_uri_names_a_repo_and_maybe_a_revision(tmp_path: Path) -> None:
    assert hf_repo("hf://Qwen/Qwen2.5-0.5B-Instruct") == ("Qwen/Qwen2.5-0.5B-Instruct", None)
    assert hf_repo("hf://facebook/opt-125m:abc123") == ("facebook/opt-125m", "abc123")
    said = download("hf://nobody-here/no-such-model-zz:deadbeef", tmp_path, {})
    assert "not in this machine's Hugging Face cache" in said
    note = json.loads((tmp_path / "testbed-stand-in.json").read_text())
    assert note["repo_id"] == "nobody-here/no-such-model-zz"
    assert note["weights"] is False
    with pytest.raises(RuntimeError, match="Cannot recognize storage type for gopher://x"):
        download("gopher://x", tmp_path, {})


def _pod(uri: str) -> dict[str, object]:
    return {"metadata": {"annotations": {SOURCE_URI: uri}},
            "spec": {"containers": [{"name": "kserve-container", "image": SERVER}]}}  # fmt: skip


def test_the_webhook_adds_the_storage_initializer_for_a_download() -> None:
    pod = _pod("hf://Qwen/Qwen2.5-0.5B-Instruct")
    inject(pod)
    spec = pod["spec"]
    assert isinstance(spec, dict)
    (init,) = spec["initContainers"]
    assert (init["name"], init["args"]) == (
        "storage-initializer", ["hf://Qwen/Qwen2.5-0.5B-Instruct", "/mnt/models"]
    )  # fmt: skip
    assert spec["volumes"] == [{"name": "kserve-provision-location", "emptyDir": {}}]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "kserve-provision-location", "mountPath": "/mnt/models", "readOnly": True}
    ]
    inject(pod)  # admitted once
    assert len(spec["initContainers"]) == 1


def test_the_webhook_mounts_a_claim_at_its_path_without_copying() -> None:
    pod = _pod("pvc://models/qwen/0.5b")
    inject(pod)
    spec = pod["spec"]
    assert isinstance(spec, dict)
    assert "initContainers" not in spec
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "models"
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "kserve-pvc-source", "mountPath": "/mnt/models", "subPath": "qwen/0.5b",
         "readOnly": True}
    ]  # fmt: skip
