"""``testbed load URL``: an ad-hoc load test, no campaign file needed.

Builds a ``load:`` section from the flags, runs the load probe against the URL, writes
records.jsonl, summary.json and the plots into ``--out`` and prints a table. The model name
and the simulator's tokenizer rule are discovered from the server where it tells them.
Exit codes as every command's: 0 on PASS or INCONCLUSIVE (1 for INCONCLUSIVE with
``--fail-on inconclusive``), 1 on FAIL, 3 when the server is unreachable, 5 when not one
request was sent; the reason is printed.
"""

from __future__ import annotations

import argparse
from typing import Any

from testbed.cli import load_endpoints as endpoint_flags
from testbed.cli import load_workload
from testbed.cli.exit_policy import add_fail_on, fail_on
from testbed.core.errors import InputError

PROFILES = ("synchronous", "concurrency", "rate", "sweep", "ramp", "trace")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "load",
        help="an ad-hoc load test against a URL, no campaign file needed",
        description="Run the load probe against URL, e.g. `testbed load http://127.0.0.1:8000"
        " --profile rate --rate 50 --duration 10`.",
    )
    p.add_argument("url", help="base URL of the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--profile", choices=PROFILES, help="default concurrency (--trace: trace)")
    p.add_argument("--concurrency", type=int, help="requests in flight (closed loop)")
    p.add_argument("--rate", type=float, help="arrival rate, requests/s (open loop)")
    p.add_argument(
        "--stages",
        metavar="RATE:SECONDS,...",
        help="several rates in a row, each its own stage and figures, e.g. 2:50,5:50"
        " (RATE:Nr runs N requests; RATE alone: --duration/--requests)",
    )
    p.add_argument("--arrival", choices=("constant", "poisson", "gamma"))
    p.add_argument("--gamma-shape", type=float, help="shape of gamma inter-arrivals")
    p.add_argument(
        "--duration",
        type=float,
        help="at most this many seconds per stage (default: until --requests have run, else 10)",
    )
    p.add_argument("--requests", type=int, help="requests per stage, all of them run")
    p.add_argument("--warmup", type=float, help="seconds excluded at the start")
    p.add_argument("--cooldown", type=float, help="seconds excluded at the end")
    p.add_argument("--timeout", type=float, help="per-request timeout, s")
    p.add_argument("--max-in-flight", type=int, help="cap on requests in flight")
    p.add_argument("--api", choices=endpoint_flags.APIS)
    p.add_argument("--grpc", metavar="HOST:PORT", help="--api tgis: the TGIS gRPC address")
    p.add_argument("--no-stream", action="store_true", help="unary requests (no TTFT/ITL)")
    p.add_argument("--input-tokens", type=int, help="prompt tokens (synthetic)")
    p.add_argument("--output-tokens", type=int, help="output tokens (max_tokens)")
    p.add_argument("--prefix-tokens", type=int, help="shared prefix tokens")
    p.add_argument("--prefix-groups", type=int, help="distinct shared prefixes")
    p.add_argument("--dataset", help="prompts file instead of synthetic prompts")
    p.add_argument(
        "--dataset-format",
        choices=("jsonl", "sharegpt", "sessions"),
        default="jsonl",
        help="sessions: every turn of a ShareGPT file's conversations, with their history",
    )
    p.add_argument("--sweep-rates", type=int, help="rate stages of a sweep")
    p.add_argument("--sweep-max-concurrency", type=int, help="saturation stage concurrency")
    p.add_argument("--ramp-start", type=float, help="ramp start rate, requests/s")
    p.add_argument("--ramp-end", type=float, help="ramp end rate, requests/s")
    p.add_argument("--slo-ttft-p99-ms", type=float, help="SLO: TTFT p99 bound, ms")
    p.add_argument("--slo-itl-p99-ms", type=float, help="SLO: ITL p99 bound, ms")
    p.add_argument("--slo-e2e-p99-ms", type=float, help="SLO: e2e p99 bound, ms")
    p.add_argument("--processes", type=int, help="load processes (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", help="model name (default: discovered at /v1/models)")
    p.add_argument(
        "--models",
        metavar="NAME[=WEIGHT],...",
        help="a traffic mix over models or LoRA adapters of the endpoint, e.g. a=3,b=1,c"
        " (figures per model in the summary)",
    )
    p.add_argument(
        "--header",
        dest="headers",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header sent with every request; repeatable. A secret's value as a reference:"
        " --header 'Authorization=Bearer ${env:TOKEN}'",
    )
    p.add_argument(
        "--extra-body",
        metavar="JSON",
        help='fields merged into every request body, e.g. \'{"temperature": 0.7, "seed": 1}\'',
    )
    p.add_argument("--tokenizer", help="local tokenizer folder for client-side counts")
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument(
        "--insecure", action="store_true", help="https: accept any certificate (no check)"
    )
    p.add_argument("--ca-bundle", metavar="PEM", help="https: trust the CAs in this PEM file")
    p.add_argument("--out", help="output directory, new or empty (default runs/load-<stamp>)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--json", action="store_true", help="print summary.json instead of a table")
    load_workload.add_flags(p)
    endpoint_flags.add_flags(p)
    add_fail_on(p)
    p.set_defaults(handler=handle)


_FLAT = {
    "profile": "profile",
    "concurrency": "concurrency",
    "rate": "rate",
    "stages": "stages",  # the model reads the RATE:SECONDS,... string
    "arrival": "arrival",
    "gamma_shape": "gamma_shape",
    "duration": "duration_s",
    "requests": "requests",
    "warmup": "warmup_s",
    "cooldown": "cooldown_s",
    "timeout": "timeout_s",
    "max_in_flight": "max_in_flight",
    "api": "api",
    "processes": "processes",
    "model": "model",
}


def section(args: argparse.Namespace) -> dict[str, Any]:
    """The ``load:`` section the flags describe (unset flags keep the model's defaults)."""
    out: dict[str, Any] = {
        key: getattr(args, flag) for flag, key in _FLAT.items() if getattr(args, flag) is not None
    }
    if args.no_stream:
        out["stream"] = False
    if args.no_plots:
        out["plots"] = False
    if args.dataset:
        data: dict[str, Any] = {"kind": "file", "path": args.dataset, "format": args.dataset_format}
        if args.output_tokens:
            data["output_tokens"] = args.output_tokens
    else:
        data = {"kind": "synthetic"}
        for flag in ("input_tokens", "output_tokens", "prefix_tokens", "prefix_groups"):
            if getattr(args, flag) is not None:
                data[flag] = getattr(args, flag)
    out["dataset"] = load_workload.dataset(args) or data
    if args.trace and args.profile is None:
        out["profile"] = "trace"  # a trace replays at its offsets unless a profile is named
    out.update(_shaping(args))
    out.update(endpoint_flags.section(args))
    sweep = {"rates": args.sweep_rates, "max_concurrency": args.sweep_max_concurrency}
    if any(v is not None for v in sweep.values()):
        out["sweep"] = {k: v for k, v in sweep.items() if v is not None}
    ramp = {"start_rate": args.ramp_start, "end_rate": args.ramp_end}
    if any(v is not None for v in ramp.values()):
        out["ramp"] = {k: v for k, v in ramp.items() if v is not None}
    slo = {
        "ttft_p99_ms": args.slo_ttft_p99_ms,
        "itl_p99_ms": args.slo_itl_p99_ms,
        "e2e_p99_ms": args.slo_e2e_p99_ms,
    }
    if any(v is not None for v in slo.values()):
        out["slo"] = {k: v for k, v in slo.items() if v is not None}
    return out


def _shaping(args: argparse.Namespace) -> dict[str, Any]:
    """``headers``, ``extra_body`` and ``models`` from their flags (checked by the model)."""
    import json

    out: dict[str, Any] = {}
    headers: dict[str, str] = {}
    for item in args.headers:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--header {item!r}: give NAME=VALUE, e.g. --header x-tenant=a")
        headers[name.strip()] = value
    if headers:
        out["headers"] = headers
    if args.extra_body is not None:
        try:
            body = json.loads(args.extra_body)
        except ValueError as exc:
            raise InputError(f"--extra-body: not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise InputError("--extra-body: give a JSON object, e.g. '{\"temperature\": 0.7}'")
        out["extra_body"] = body
    if args.models:
        mix = []
        for part in filter(None, (p.strip() for p in args.models.split(","))):
            name, _, weight = part.partition("=")
            try:
                mix.append({"name": name.strip(), "weight": float(weight) if weight else 1.0})
            except ValueError:
                raise InputError(f"--models {part!r}: a weight is a number, e.g. a=3") from None
        out["models"] = mix
    return out


#: Fields of the load section the footprint check may name, and their flags.
_FIELD_FLAGS = {
    **{key: flag for flag, key in _FLAT.items()},
    "sweep.max_concurrency": "sweep_max_concurrency",
    "sweep.rates": "sweep_rates",
    "ramp.end_rate": "ramp_end",
    "dataset.input_tokens": "input_tokens",
    "dataset.prefix_groups": "prefix_groups",
}


def flag_of(field: str) -> str:
    """The flag that sets a dotted field of the ``load:`` section (for messages)."""
    flag = _FIELD_FLAGS.get(field)
    return "--" + flag.replace("_", "-") if flag else f"load.{field}"


def handle(args: argparse.Namespace) -> int:
    import json
    import sys
    import time

    from testbed.core.clock import wall_label
    from testbed.probes.base import ProbeContext
    from testbed.probes.load import run
    from testbed.probes.load.loops import run_fast
    from testbed.report.live import ProgressLines
    from testbed.report.load_run import load_document, run_section
    from testbed.results.files import RecordWriter, write_json
    from testbed.results.tables import write_tables
    from testbed.results.verdict import exit_code

    config = _config(args)
    endpoint = _endpoint(args, config)
    out, created = _output_dir(args)
    try:
        with RecordWriter(out / "records.jsonl") as records:
            ctx = ProbeContext(
                endpoints={"target": endpoint},
                config=config,
                out_dir=out,
                records=records,
                seed=args.seed,
                progress=ProgressLines(sys.stderr),  # stage k of n, requests, time left
            )
            started, clock = wall_label(), time.monotonic()
            outcome = run_fast(run(ctx))
    except InputError:  # found before any request: leave nothing behind an exit 2
        if created is not None:
            import shutil

            shutil.rmtree(created, ignore_errors=True)
        raise
    summary = {**outcome.summary, "verdict": outcome.verdict.model_dump(mode="json")}
    # the folder is a run of one treatment for `testbed report`/`compare` (report/load_run.py)
    params = config.model_dump(mode="json", exclude_defaults=True)
    summary["run"] = run_section(params, started, time.monotonic() - clock)
    write_json(out / "summary.json", summary)
    write_tables(out, load_document(out).treatments)  # records.csv, summary.csv
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        from testbed.probes.load.table import print_summary

        print_summary(summary, out)
    return exit_code(outcome.verdict.status, fail_on(args), tested=_sent_any(summary))


def _sent_any(summary: dict[str, Any]) -> bool:
    """Whether the load sent any request (a run that sent none tested nothing: exit 5)."""
    stages = summary.get("stages") or [summary]
    return any((stage.get("requests") or {}).get("total", 1) for stage in stages)


def _config(args: argparse.Namespace) -> Any:
    """The flags as a validated LoadProbe that this machine can hold."""
    from pydantic import ValidationError

    from testbed.config.load import LoadProbe
    from testbed.probes.limits import Limits
    from testbed.probes.load.footprint import excess

    try:
        config = LoadProbe.model_validate(section(args))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(f"bad load options: {problems}") from exc
    found = excess(config, Limits.here())
    if found is not None:
        raise InputError(f"{flag_of(found.field)}: {found.message}")
    return config


def _endpoint(args: argparse.Namespace, config: Any) -> Any:
    """The URL and its options, checked. A base URL ending in ``/v1`` (as OpenAI client
    libraries want it) is taken without it: testbed adds ``/v1/…`` itself."""
    import sys

    from testbed.clients.apis import APIS
    from testbed.clients.endpoint import Endpoint, Tls
    from testbed.core.urls import check_base_url

    api = APIS[config.api]
    base_url = check_base_url(args.url)
    if base_url.endswith("/v1") and api.protocol == "openai":  # whose paths start /v1/
        base_url = base_url.removesuffix("/v1")
        print(f"note: using {base_url} (testbed adds /v1/… itself)", file=sys.stderr)
    if api.grpc != bool(args.grpc):
        raise InputError("--api tgis and --grpc HOST:PORT go together (TGIS speaks gRPC)")
    if (args.insecure or args.ca_bundle) and not base_url.startswith("https://"):
        raise InputError("--insecure and --ca-bundle apply to https:// URLs only")
    return Endpoint(
        base_url=base_url,
        protocols=(api.protocol,),
        grpc_target=args.grpc,
        model=args.model or "",
        tokenizer=args.tokenizer,
        api_key=f"${{env:{args.api_key_env}}}" if args.api_key_env else None,
        tls=Tls(verify=not args.insecure, ca_bundle=args.ca_bundle),
    )


def _output_dir(args: argparse.Namespace) -> tuple[Any, Any]:
    """``--out`` (default ``runs/load-<stamp>``), created; and the outermost folder created
    for it now (``runs`` itself, the first time), or None.

    A folder that holds files already is refused: records are appended, so a second run
    would mix its records with the first's (and judge both as one). The default name gets
    a suffix instead when two runs start within the same second."""
    from pathlib import Path

    from testbed.core.clock import run_stamp

    if args.out:
        out = Path(args.out)
        used = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        if used:
            shown = ", ".join(used[:4]) + (" …" if len(used) > 4 else "")
            raise InputError(
                f"--out {out}: the folder already holds files ({shown}); a run's records"
                " would mix with them — name a new or empty folder, or remove this one first"
            )
    else:
        stamp = run_stamp()
        out = Path(f"runs/load-{stamp}")
        suffix = 1
        while out.exists():
            suffix += 1
            out = Path(f"runs/load-{stamp}-{suffix}")
    missing = [p for p in (out, *out.parents) if not p.exists()]
    created = missing[-1] if missing else None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"--out {out}: cannot create it as a directory ({exc.strerror}) — name a directory"
        ) from None
    return out, created
