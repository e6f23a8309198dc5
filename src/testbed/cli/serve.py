"""``testbed serve KIND``: start one server in the foreground — the simulator, hf or vllm.

``sim`` runs the built-in simulator until SIGTERM or Ctrl-C (exit 0) and prints one line,
``testbed sim listening on http://HOST:PORT``, once its port is open (``--port 0`` picks a
free one). Its parameters come from :class:`testbed.config.sim.SimParams`, lowest precedence
first: defaults < ``--set key=value`` (YAML value, dotted keys for nested fields) < the
explicit flags. ``--protocols openai,tgi,tgis`` adds TGIS over gRPC on ``--grpc-port`` (sim
and hf; a line ``testbed sim gRPC (tgis) on HOST:PORT`` comes before the listening line).
``hf`` runs the reference server in this process; ``vllm`` runs vLLM's server as a child
in its own process group, passes SIGINT, SIGTERM and SIGHUP on to it and waits for it.
Their settings follow the same rule: the deployment parameters of their kind (``HfParams``
plus ``batch_invariant`` and ``served_model_name``; ``VllmParams``) < ``--set`` <
``--threads``/``--dtype``. Every ``--set`` goes through the campaign's parser
(``config.overrides``); a bad item exits 2 naming it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

#: Simulator flags: (flag, SimParams dotted key, type, help). The one list the parser, the
#: precedence rule and the error messages all read.
SIM_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("--ttft-ms", "ttft_ms", float, "time to first token (ms)"),
    ("--itl-ms", "itl_ms", float, "inter-token latency (ms)"),
    ("--ttft-per-prompt-token-ms", "ttft_per_prompt_token_ms", float, "TTFT per prompt token"),
    ("--ttft-per-running-ms", "ttft_per_running_ms", float, "TTFT per other running request"),
    ("--itl-per-running-ms", "itl_per_running_ms", float, "ITL per other running request"),
    ("--jitter", "jitter.distribution", str, "fixed | normal | uniform | exponential"),
    ("--ttft-jitter-ms", "jitter.ttft_scale_ms", float, "TTFT jitter scale (ms)"),
    ("--itl-jitter-ms", "jitter.itl_scale_ms", float, "ITL jitter scale (ms)"),
    ("--max-concurrency", "max_concurrency", int, "requests served at once"),
    ("--max-waiting", "max_waiting", int, "requests queued beyond that (then 503)"),
    ("--kv-cache-tokens", "kv_cache_tokens", int, "KV-cache capacity (tokens)"),
    ("--block-size", "block_size", int, "tokens per KV-cache block"),
    ("--output-tokens", "default_output_tokens", int, "tokens when a request sets no max"),
    ("--eos-rate", "eos_rate", float, "fraction of prompts that stop early (no ignore_eos)"),
    ("--seed", "seed", int, "seed of text, jitter and faults"),
    ("--error-rate", "faults.error_rate", float, "fraction answered with --error-status"),
    ("--error-status", "faults.error_status", int, "HTTP status of injected errors"),
    ("--disconnect-rate", "faults.disconnect_rate", float, "fraction cut mid-stream"),
    ("--malformed-rate", "faults.malformed_rate", float, "fraction with a malformed chunk"),
    ("--corrupt-rate", "faults.corrupt_rate", float, "fraction with a wrong answer"),
    ("--slow-start-s", "faults.slow_start_s", float, "seconds before /health is ready"),
)
KINDS = ("sim", "hf", "vllm")
#: servers.adapters.base.GRPC_PORT, TGIS's (not imported here: that loads every adapter, and
#: this module is read at every start of the CLI).
GRPC_PORT = 8033


def _protocols(value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(",") if p.strip())


def port(text: str) -> int:
    """A ``--port`` value: 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535; 0 picks a free one)")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="start one server: sim, hf or vllm",
        description="Start one server in the foreground; SIGTERM or Ctrl-C stops it.",
    )
    parser.add_argument("kind", choices=KINDS, metavar="KIND", help="sim | hf | vllm")
    parser.add_argument("--model", help="model to serve (sim: the served model name)")
    parser.add_argument("--port", type=port, default=8000, help="port; 0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--threads", type=int, help="torch threads (hf)")
    parser.add_argument("--dtype", help="weights dtype, e.g. float32")
    parser.add_argument(
        "--protocols",
        type=_protocols,
        help="sim, hf: comma-separated protocols to serve (openai,tgi over HTTP; tgis over"
        " gRPC on --grpc-port); default openai,tgi",
    )
    parser.add_argument(
        "--grpc-port",
        type=port,
        default=GRPC_PORT,
        help=f"sim, hf: gRPC port of the tgis protocol (default {GRPC_PORT}, TGIS's; 0 picks"
        " a free one)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server parameter (YAML value; dotted keys for nested fields)",
    )
    parser.add_argument(
        "--default",
        dest="defaults",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="sim: a parameter that the --params-env variable, --set and flags all override"
        " (how the emulator's vLLM stand-in gives vLLM's sizes the container may change)",
    )
    parser.add_argument(
        "--params-env",
        metavar="VAR",
        help="sim: read parameters from the JSON object in environment variable VAR first"
        " (--set and flags win); how the emulator's vLLM stand-in passes a container's"
        " TESTBED_SIM_PARAMS",
    )
    sim = parser.add_argument_group("simulator (KIND sim)")
    for flag, key, kind, help_text in SIM_FLAGS:
        sim.add_argument(flag, dest=_dest(key), type=kind, help=help_text)
    sim.add_argument(
        "--adapter",
        dest="adapters",
        action="append",
        default=[],
        metavar="NAME[:KEY=VALUE,...]",
        help="serve NAME too (a LoRA adapter) with its own latency, e.g."
        " a:ttft_ms=20,itl_ms=5 (keys of params.models; unset ones take the top level's);"
        " repeatable",
    )
    parser.set_defaults(handler=handle)


def _dest(key: str) -> str:
    return "sim__" + key.replace(".", "__")


def handle(args: argparse.Namespace) -> int:
    from testbed.core.errors import InputError

    serve, takes = _KINDS[args.kind]
    given = [flag for flag, key, _, _ in SIM_FLAGS if getattr(args, _dest(key)) is not None]
    given += ["--params-env"] if args.params_env else []
    given += ["--default"] if args.defaults else []
    given += ["--adapter"] if args.adapters else []
    if given and "sim" not in takes:
        raise InputError(f"{', '.join(given)} only apply to `testbed serve sim`")
    if args.threads is not None and "threads" not in takes:
        raise InputError(f"--threads only applies to `testbed serve hf`, not {args.kind}")
    if (args.protocols or args.grpc_port != GRPC_PORT) and "protocols" not in takes:
        raise InputError("--protocols and --grpc-port apply to `testbed serve sim` and `hf`")
    return serve(args)


def sim_params(args: argparse.Namespace) -> Any:
    """The SimParams the arguments describe; an InputError names the bad key or flag."""
    from testbed.config.overrides import settings_from
    from testbed.config.sim import SimParams

    flags = {key: (flag, getattr(args, _dest(key))) for flag, key, _, _ in SIM_FLAGS}
    flags |= {"model_name": ("--model", args.model), "dtype": ("--dtype", args.dtype)}
    flags["protocols"] = ("--protocols", args.protocols)
    overrides = [*args.defaults, *_env_overrides(args.params_env), *args.overrides]
    overrides += [item for spec in args.adapters for item in adapter_overrides(spec)]
    return settings_from(
        SimParams, overrides, flags, what="simulator parameter", example="itl_ms=5"
    )


def adapter_overrides(spec: str) -> list[str]:
    """``--adapter a:ttft_ms=20,itl_ms=5`` as ``--set`` items of ``models.a``."""
    from testbed.core.errors import InputError

    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise InputError(f"--adapter {spec!r}: give a name first, e.g. --adapter a:ttft_ms=20")
    pairs = [p.strip() for p in rest.split(",") if p.strip()]
    if any("=" not in p for p in pairs):
        raise InputError(
            f"--adapter {spec!r}: after the name come KEY=VALUE pairs, e.g. a:ttft_ms=20,itl_ms=5"
        )
    return [f"models.{name}.{p}" for p in pairs] or [f"models.{name}={{}}"]


def _env_overrides(var: str | None) -> list[str]:
    """``KEY=JSON`` overrides from the JSON object in ``$var`` (none when unset or empty)."""
    import json
    import os

    from testbed.core.errors import InputError

    text = os.environ.get(var, "").strip() if var else ""
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"--params-env {var}: ${var} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"--params-env {var}: ${var} must be a JSON object of parameters")
    out: list[str] = []

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                flatten(f"{prefix}{key}.", inner)
        else:
            out.append(f"{prefix[:-1]}={json.dumps(value)}")

    flatten("", data)
    return out


def _serve_hf(args: argparse.Namespace) -> int:
    """The reference server in this process, until SIGTERM or Ctrl-C."""
    from testbed.config.overrides import settings_from
    from testbed.servers.reference import DEFAULT_MODEL, ReferenceSettings, serve

    flags = {"threads": ("--threads", args.threads), "dtype": ("--dtype", args.dtype)}
    flags["protocols"] = ("--protocols", args.protocols)
    settings = settings_from(
        ReferenceSettings, args.overrides, flags, what="hf server setting", example="threads=2"
    )
    return serve(settings, args.model or DEFAULT_MODEL, args.host, args.port, args.grpc_port)


def _serve_vllm(args: argparse.Namespace) -> int:
    """Run the vLLM server in the foreground until it ends or is stopped (Ctrl-C, SIGTERM,
    SIGHUP: exit 130 once it is gone); its failure is an infrastructure error (exit 3), its
    own exit codes never leak through as verdicts."""
    import collections
    import os
    import signal
    import sys

    from kubefacts.process_group import run_foreground
    from testbed.config.deployments import VllmParams
    from testbed.config.overrides import settings_from
    from testbed.core.errors import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK
    from testbed.servers.adapters import kv_cache
    from testbed.servers.adapters.vllm import VllmAdapter
    from testbed.servers.models import resolve_model
    from testbed.servers.startup_log import root_cause

    settings = settings_from(
        VllmParams,
        args.overrides,
        {"dtype": ("--dtype", args.dtype)},
        what="vLLM server setting",
        example="max_batch_size=8",
    )
    folder = resolve_model(args.model or "bundled:smollm2-135m")
    adapter = VllmAdapter()
    argv = adapter.command(settings, folder, args.host, args.port)
    env = {**os.environ, **adapter.env(settings), **settings.env}
    if not kv_cache.explicit(settings, os.environ):
        sys.stderr.write(
            f"testbed: KV cache {env['VLLM_CPU_KVCACHE_SPACE']} GiB (VLLM_CPU_KVCACHE_SPACE),"
            " sized to the memory free now; set kv_cache_gb to choose\n"
        )
    tail: collections.deque[str] = collections.deque(maxlen=400)

    def passed_on(raw: bytes) -> None:  # vLLM's output passes through, kept for the cause
        sys.stdout.buffer.write(raw)
        sys.stdout.flush()
        tail.append(raw.decode("utf-8", "replace"))

    # Ctrl-C, SIGTERM (systemd, a container runtime, a CI runner) and SIGHUP are passed on
    # to vLLM's whole process group, and testbed waits for it: never a vLLM left serving.
    ended = run_foreground(argv, env, passed_on)
    if ended.stopped_by is not None:
        name = signal.Signals(ended.stopped_by).name
        how = "killed" if ended.killed else f"stopped (exit code {ended.code})"
        sys.stderr.write(f"testbed: {name}: vLLM {how}\n")
        return EXIT_INTERRUPTED
    if ended.code == 0:
        return EXIT_OK
    cause = root_cause("".join(tail))
    sys.stderr.write(
        f"testbed: error: vLLM exited with code {ended.code}"
        + (f": {cause}" if cause else "")
        + " (its log is above)\n"
    )
    return EXIT_INFRA


def _serve_sim(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    import sys

    from testbed.servers.sim import precise_event_loop, serve

    params = sim_params(args)
    loop = precise_event_loop()
    stop = asyncio.Event()

    def listening(url: str) -> None:
        sys.stdout.write(f"testbed sim listening on {url}\n")
        sys.stdout.flush()

    def grpc(target: str) -> None:
        sys.stdout.write(f"testbed sim gRPC (tgis) on {target}\n")

    async def main() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(
            params,
            host=args.host,
            port=args.port,
            stop=stop,
            on_listening=listening,
            grpc_port=args.grpc_port,
            on_grpc=grpc,
        )

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return 0


#: Each kind's server and the groups of flags it takes (the simulator's own, --threads,
#: --protocols/--grpc-port); the others refuse them rather than ignore them.
_KINDS: dict[str, tuple[Callable[[argparse.Namespace], int], frozenset[str]]] = {
    "sim": (_serve_sim, frozenset({"sim", "protocols"})),
    "hf": (_serve_hf, frozenset({"threads", "protocols"})),
    "vllm": (_serve_vllm, frozenset()),
}
