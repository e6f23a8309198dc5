"""``testbed serve KIND``: start one server in the foreground — the simulator, hf or vllm.

``sim`` runs the built-in simulator until SIGTERM or Ctrl-C (exit 0) and prints one line,
``testbed sim listening on http://HOST:PORT``, once its port is open (``--port 0`` picks a
free one). Its parameters come from :class:`testbed.config.sim.SimParams`, lowest precedence
first: defaults < ``--set key=value`` (YAML value, dotted keys for nested fields) < the
explicit flags. ``hf`` and ``vllm`` are handed to their own modules.
"""

from __future__ import annotations

import argparse
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
#: Where the other kinds live; each module has ``serve_main(args) -> int``.
SERVER_MODULES = {"hf": "testbed.servers.reference", "vllm": "testbed.servers.adapters.vllm"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="start one server: sim, hf or vllm",
        description="Start one server in the foreground; SIGTERM or Ctrl-C stops it.",
    )
    parser.add_argument("kind", choices=KINDS, metavar="KIND", help="sim | hf | vllm")
    parser.add_argument("--model", help="model to serve (sim: the served model name)")
    parser.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--threads", type=int, help="CPU threads (hf, vllm)")
    parser.add_argument("--dtype", help="weights dtype, e.g. float32")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server parameter (YAML value; dotted keys for nested fields)",
    )
    sim = parser.add_argument_group("simulator (KIND sim)")
    for flag, key, kind, help_text in SIM_FLAGS:
        sim.add_argument(flag, dest=_dest(key), type=kind, help=help_text)
    parser.set_defaults(handler=handle)


def _dest(key: str) -> str:
    return "sim__" + key.replace(".", "__")


def handle(args: argparse.Namespace) -> int:
    if args.kind == "sim":
        return _serve_sim(args)
    from testbed.core.errors import InputError

    given = [flag for flag, key, _, _ in SIM_FLAGS if getattr(args, _dest(key)) is not None]
    if given:
        raise InputError(f"{', '.join(given)} only apply to `testbed serve sim`")
    import importlib

    name = SERVER_MODULES[args.kind]
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise InputError(f"`testbed serve {args.kind}` is not available in this build") from None
    return int(module.serve_main(args))


def sim_params(args: argparse.Namespace) -> Any:
    """The SimParams the arguments describe; an InputError names the bad key or flag."""
    import yaml
    from pydantic import ValidationError

    from testbed.config.sim import SimParams
    from testbed.core.errors import InputError

    data: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for item in args.overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--set {item!r}: write it as KEY=VALUE, e.g. --set itl_ms=5")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise InputError(f"--set {key}: {raw!r} is not a YAML value ({exc})") from None
        _put(data, key, value, f"--set {key}")
        origin[key] = f"--set {key}"
    explicit = {
        "model_name": args.model,
        "dtype": args.dtype,
        **{key: getattr(args, _dest(key)) for _, key, _, _ in SIM_FLAGS},
    }
    flags = {key: flag for flag, key, _, _ in SIM_FLAGS} | {
        "model_name": "--model",
        "dtype": "--dtype",
    }
    for key, value in explicit.items():
        if value is not None:
            _put(data, key, value, flags[key])
            origin[key] = flags[key]
    try:
        return SimParams.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            where = origin.get(key, f"--set {key}" if key else "the parameters")
            problems.append(f"{where}: {err['msg']}")
        raise InputError(
            "invalid simulator parameter — " + "; ".join(problems) + " (see `testbed serve --help`)"
        ) from None


def _put(data: dict[str, Any], dotted: str, value: Any, where: str) -> None:
    from testbed.core.errors import InputError

    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise InputError(f"{where}: '{part}' is not a group of parameters")
        node = child
    node[leaf] = value


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

    async def main() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(params, host=args.host, port=args.port, stop=stop, on_listening=listening)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return 0
