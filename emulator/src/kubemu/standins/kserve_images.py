"""KServe's images played on this machine (``--kserve-stand-in``): its Hugging Face model server
by testbed's simulator, its storage initializer by :mod:`.kserve_storage`.

``kserve/huggingfaceserver`` (the ``kserve-huggingfaceserver`` runtime) is read as its
``__main__`` reads its argv — argparse's ``parse_known_args``: ``--flag=value`` or ``--flag
value``, the *last* of a repeated flag wins (the runtime's ``--model_name={{.Name}}`` comes
first, so an InferenceService's own ``--model_name=qwen`` wins), unknown flags are ignored.
What it plays:

==========================================  ================================================
KServe's model server                       simulator
==========================================  ================================================
``--model_name`` (default ``model``)        the served model name; with the vLLM backend
                                            (``--backend`` auto or vllm) vLLM's
                                            ``--served-model-name`` wins, as KServe's does
``--http_port`` (default 8080)              the port (this pod's; 8080 is bound undeclared)
``KSERVE_OPENAI_ROUTE_PREFIX`` (env,        ``openai_prefix``: ``/openai/v1/completions``,
default ``/openai``)                        ``/openai/v1/chat/completions``, ``/openai/v1/models``
``--model_id`` / ``--model_dir`` (default   the model must be somewhere: without
``/mnt/models``)                            ``--model_id`` the directory must exist (the
                                            storage initializer fills it), else the server
                                            exits 1 as KServe's does
``--max_model_len`` (``--max_length``,      ``max_model_len``
vLLM's ``--max-model-len``)
``--dtype``                                 ``dtype`` (a label)
vLLM's ``--max-num-seqs``                   ``max_concurrency``
==========================================  ================================================

The simulator's own knobs come from ``TESTBED_SIM_PARAMS`` (as for the vLLM stand-in). The
first line of the container's log names the image played and the flags not played.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubemu.standins.tgi import flag_pairs
from kubemu.standins.vllm_sim import ENV

SERVER = re.compile(r"(^|/)kserve/huggingfaceserver([:@]|$)")
INITIALIZER = re.compile(r"(^|/)kserve/storage-initializer([:@]|$)")
HTTP_PORT = 8080  # KServe's DEFAULT_HTTP_PORT
MODEL_DIR = "/mnt/models"  # its --model_dir default (constants.DefaultModelLocalMountPath)
PREFIX_ENV = "KSERVE_OPENAI_ROUTE_PREFIX"
#: Flags of KServe's model server and of vLLM that take no value.
_SWITCHES = frozenset(
    {"--disable_lower_case", "--disable_special_tokens", "--trust_remote_code",
     "--return_token_type_ids", "--return_offsets_mapping", "--return_probabilities",
     "--return_raw_logits", "--disable_log_requests", "--enable-chunked-prefill",
     "--no-enable-chunked-prefill", "--enable-prefix-caching", "--no-enable-prefix-caching",
     "--enforce-eager", "--trust-remote-code", "--disable-log-requests",
     "--disable-log-stats", "--enable-auto-tool-choice"}
)  # fmt: skip
_PLAYED = frozenset(
    {"--model_name", "--served-model-name", "--backend", "--http_port", "--model_id",
     "--model_dir", "--max_model_len", "--max_length", "--max-model-len", "--dtype",
     "--max-num-seqs"}
)  # fmt: skip


class KServeImages:
    """Plays KServe's model server and storage initializer (a ``kubelet.images.PodStandIn``)."""

    def plays(self, image: str) -> bool:
        return bool(SERVER.search(image) or INITIALIZER.search(image))

    def listens(self, image: str) -> tuple[int, ...]:
        """Ports the image's process binds without declaring them: the model server's 8080."""
        return (HTTP_PORT,) if SERVER.search(image) else ()

    def __call__(
        self,
        python: str,
        image: str,
        command: Sequence[str],
        args: Sequence[str],
        env: Mapping[str, str],
        ports: Mapping[int, int],
        mounts: Mapping[str, str],
    ) -> tuple[list[str], str]:
        """``(host argv, the note for the container's log)``."""
        if INITIALIZER.search(image):
            argv = [python, "-m", "kubemu.standins.kserve_storage", *args]
            note = (
                f"testbed cluster emulate --kserve-stand-in: {image} is played by testbed's"
                " storage initializer (hf:// from this machine's Hugging Face cache, s3://)"
            )
            return argv, note
        return server_argv(python, image, [*command[1:], *args], env, ports, mounts)


def _last(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """argparse's answer: the last value of each flag."""
    return dict(pairs)


def server_argv(
    python: str,
    image: str,
    words: Sequence[str],
    env: Mapping[str, str],
    ports: Mapping[int, int],
    mounts: Mapping[str, str],
) -> tuple[list[str], str]:
    """``testbed serve sim`` for KServe's model server run with ``words`` (see the module)."""
    pairs = flag_pairs(words, _SWITCHES)
    opts = _last(pairs)
    name = opts.get("--model_name") or "model"
    if opts.get("--backend", "auto") != "huggingface" and opts.get("--served-model-name"):
        name = opts["--served-model-name"].split()[0]
    prefix = env.get(PREFIX_ENV, "/openai")
    prefix = f"/{prefix}" if prefix and not prefix.startswith("/") else prefix
    model_dir = opts.get("--model_dir") or mounts.get(MODEL_DIR, MODEL_DIR)
    if not opts.get("--model_id") and not Path(model_dir).is_dir():
        # KServe's server fails the same way when nothing provisioned the model (its docs:
        # "No such file or directory: '/mnt/models'").
        message = f"No such file or directory: '{opts.get('--model_dir') or MODEL_DIR}'"
        return [python, "-c", f"import sys; sys.exit({message!r})"], ""
    params: dict[str, Any] = {"protocols": ["openai"], "openai_prefix": prefix.rstrip("/")}
    length = opts.get("--max_model_len") or opts.get("--max_length") or opts.get("--max-model-len")
    if length:
        params["max_model_len"] = int(length)
    if opts.get("--dtype"):
        params["dtype"] = opts["--dtype"]
    if opts.get("--max-num-seqs"):
        params["max_concurrency"] = int(opts["--max-num-seqs"])
    port = opts.get("--http_port") or str(ports.get(HTTP_PORT, HTTP_PORT))
    argv = [python, "-m", "testbed", "serve", "sim", "--params-env", ENV, "--port", port,
            "--model", name]  # fmt: skip
    argv += [part for k, v in params.items() for part in ("--set", f"{k}={json.dumps(v)}")]
    ignored = sorted({f"{n}" for n, _ in pairs if n not in _PLAYED})
    note = (
        f"testbed cluster emulate --kserve-stand-in: {image} is played by testbed's simulator"
        f" (model {name} at {prefix or '/'}v1/…; more from ${ENV})"
        + (f"; not played: {', '.join(ignored)}" if ignored else "")
    )
    return argv, note
