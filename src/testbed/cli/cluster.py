"""``testbed cluster emulate``: a Kubernetes API server on this machine, until stopped.

It writes a kubeconfig (server URL and a bearer token the emulator checks), creates the
requested Ready nodes with CPU, memory, GPU and MIG capacity, prints one line naming the
kubeconfig, and serves until SIGINT or SIGTERM (exit 0). docs/emulator.md describes it.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.cli.serve import port

if TYPE_CHECKING:
    from kubemu import TgiStandIn


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="a local Kubernetes cluster emulator",
        description="Work with clusters; `emulate` runs a Kubernetes API emulator here.",
    )
    verbs = parser.add_subparsers(dest="cluster_command", metavar="VERB", parser_class=type(parser))
    emulate = verbs.add_parser(
        "emulate",
        formatter_class=_ModelDefaults,
        help="serve an emulated Kubernetes API until stopped",
        description="Serve an emulated Kubernetes API (kubectl and the official client work"
        " against it) until SIGINT or SIGTERM.",
    )
    _add_server_flags(emulate)
    _add_plane_flags(emulate)
    emulate.set_defaults(handler=handle_emulate)
    parser.set_defaults(handler=lambda args: _usage(parser))


def _add_server_flags(emulate: argparse.ArgumentParser) -> None:
    """Where the API server listens and the nodes it creates."""
    emulate.add_argument(
        "--port", type=port, default=0, help="port to listen on; 0 picks a free one"
    )
    emulate.add_argument("--host", default="127.0.0.1", help="address to bind")
    emulate.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path("testbed-emulator.kubeconfig"),
        metavar="FILE",
        help="where to write the kubeconfig (mode 0600: it holds the token)",
    )
    emulate.add_argument(
        "--no-rbac",
        dest="rbac",
        action="store_false",
        help="let every authenticated request through (RBAC is enforced by default; the"
        " kubeconfig's admin token may do everything either way)",
    )
    emulate.add_argument("--nodes", type=int, help="number of nodes")
    emulate.add_argument("--gpus-per-node", type=int, help="nvidia.com/gpu per node")
    emulate.add_argument(
        "--mig",
        action="append",
        default=[],
        metavar="PROFILE=COUNT",
        help="MIG slices per node, e.g. --mig 1g.10gb=7 (repeatable)",
    )
    emulate.add_argument("--node-cpu", type=int, help="CPU cores per node")
    emulate.add_argument("--node-memory-gb", type=int, help="memory per node in GiB")
    emulate.add_argument("--node-pods", type=int, help="pods per node")
    emulate.add_argument("--gpu-product", help="nvidia.com/gpu.product label")


def _add_plane_flags(emulate: argparse.ArgumentParser) -> None:
    """The control plane's flags (scheduler, controllers, process-kubelet)."""
    plane = emulate.add_argument_group("control plane (scheduler, controllers, process-kubelet)")
    plane.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="pod scratch dirs, PVC data and container logs (default: a temporary dir, removed)",
    )
    plane.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SELECTOR=GLOB:KIND[:SECONDS]",
        help="inject a fault into matching pods, e.g. --fault 'image=*vllm*:image-pull';"
        " SELECTOR image|pod|namespace, KIND image-pull|crash|oom|slow-schedule (repeatable)",
    )
    plane.add_argument(
        "--datashim",
        action="store_true",
        help="serve Datashim's Dataset kind and act as its operator: an S3 Dataset becomes a"
        " claim holding a copy of its bucket, mounted into labelled pods (seed 004)",
    )
    plane.add_argument(
        "--kserve-stand-in",
        action="store_true",
        help="serve KServe's InferenceService, ServingRuntime and ClusterServingRuntime kinds"
        " (its Hugging Face and vLLM runtimes installed) and play its controller (RawDeployment"
        " mode: runtime selection, the model's args and env, storageUri, status.url, Ready),"
        " with its Hugging Face server played by testbed's simulator at /openai/v1/… (a"
        " stand-in, not KServe)",
    )
    plane.add_argument(
        "--tgi-stand-in",
        action="store_true",
        help="play TGI and TGIS images with testbed's reference server speaking their"
        " protocols (a rehearsal: the latency is the reference server's)",
    )
    plane.add_argument(
        "--gateway-stand-in",
        action="store_true",
        help="play a Gateway API + inference extension implementation: program Gateways of"
        " class controller testbed.io/gateway-stand-in, route HTTPRoutes to InferencePools"
        " and pick endpoints with the stack's EPP configuration; implies --vllm-stand-in",
    )
    plane.add_argument(
        "--vllm-stand-in",
        action="store_true",
        help="play vLLM images (vLLM's and llm-d's) with testbed's simulator, translating"
        " their flags (prefix caching, block size, KV blocks, max sequences)",
    )
    plane.add_argument(
        "--crash-backoff",
        type=float,
        metavar="SECONDS",
        help="first CrashLoopBackOff/ImagePullBackOff delay, doubling up to 300 s",
    )
    plane.add_argument(
        "--testbed-image-pattern",
        metavar="REGEX",
        help="images run as `python -m testbed …` of this interpreter",
    )
    plane.add_argument(
        "--vllm-image-pattern",
        metavar="REGEX",
        help="images run with the vLLM venv's python (vllm.entrypoints.openai.api_server)",
    )
    plane.add_argument(
        "--vllm-python",
        type=Path,
        metavar="PATH",
        help="the vLLM interpreter (default $TESTBED_VLLM_PYTHON or .venv-vllm/bin/python)",
    )


#: Flags whose default is the emulator's own: ``--help`` reads it from the model, which is
#: imported only then (the emulator takes seconds to import); a flag not given is left out.
_MODEL_FIELDS = {
    "nodes": ("ClusterShape", "nodes"),
    "gpus_per_node": ("ClusterShape", "gpus_per_node"),
    "node_cpu": ("ClusterShape", "node_cpu"),
    "node_memory_gb": ("ClusterShape", "node_memory_gb"),
    "node_pods": ("ClusterShape", "node_pods"),
    "gpu_product": ("ClusterShape", "gpu_product"),
    "crash_backoff": ("KubeletSettings", "backoff_s"),
    "testbed_image_pattern": ("ImageRules", "testbed_pattern"),
    "vllm_image_pattern": ("ImageRules", "vllm_pattern"),
}


class _ModelDefaults(argparse.HelpFormatter):
    """Help whose ``(default …)`` comes from the emulator's models, not a copy here."""

    def _expand_help(self, action: argparse.Action) -> str:
        text = super()._expand_help(action)
        source = _MODEL_FIELDS.get(action.dest)
        return f"{text} (default {_model_default(*source)})" if source else text


def _model_default(model: str, name: str) -> Any:
    import dataclasses

    import kubemu as emulator

    cls = getattr(emulator, model)
    if dataclasses.is_dataclass(cls):
        return next(f.default for f in dataclasses.fields(cls) if f.name == name)
    return cls.model_fields[name].default


def _given(args: argparse.Namespace, fields: dict[str, str]) -> dict[str, Any]:
    """``{field: value}`` of the flags given (``fields``: flag dest → model field)."""
    values = {field: getattr(args, dest) for dest, field in fields.items()}
    return {field: value for field, value in values.items() if value is not None}


def _usage(parser: argparse.ArgumentParser) -> int:
    from testbed.core.errors import EXIT_INPUT

    parser.print_help()
    return EXIT_INPUT


def shape_from_args(args: argparse.Namespace) -> Any:
    """The ClusterShape the flags describe; an InputError names the bad flag."""
    from pydantic import ValidationError

    from kubemu import ClusterShape
    from testbed.core.errors import InputError

    mig: dict[str, int] = {}
    for item in args.mig:
        profile, sep, count = item.partition("=")
        if not sep or not count.strip().isdigit():
            raise InputError(f"--mig {item!r}: write it as PROFILE=COUNT, e.g. --mig 1g.10gb=7")
        mig[profile.strip()] = int(count)
    flags = {
        "nodes": "--nodes",
        "gpus_per_node": "--gpus-per-node",
        "mig": "--mig",
        "node_cpu": "--node-cpu",
        "node_memory_gb": "--node-memory-gb",
        "node_pods": "--node-pods",
        "gpu_product": "--gpu-product",
    }
    fields = {
        dest: field for dest, (model, field) in _MODEL_FIELDS.items() if model == "ClusterShape"
    }
    try:
        return ClusterShape(mig=mig, **_given(args, fields))
    except ValidationError as exc:
        problems = [f"{flags.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}" for e in exc.errors()]
        raise InputError("; ".join(problems)) from None


def plane_from_args(args: argparse.Namespace) -> Any:
    """The control plane's PlaneSettings the flags describe; an InputError names the bad flag."""
    import re

    from kubemu import (
        FaultRule,
        ImageRules,
        KServeImages,
        KubeletSettings,
        PlaneSettings,
        vllm_sim_stand_in,
    )
    from testbed.core.errors import InputError

    for flag, pattern in (
        ("--testbed-image-pattern", args.testbed_image_pattern),
        ("--vllm-image-pattern", args.vllm_image_pattern),
    ):
        if pattern is None:
            continue
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InputError(f"{flag} {pattern!r} is not a regular expression: {exc}") from None
    if args.crash_backoff is not None and args.crash_backoff <= 0:
        raise InputError(
            f"--crash-backoff {args.crash_backoff}: must be a positive number of seconds"
        )
    if args.vllm_python is not None and not args.vllm_python.exists():
        raise InputError(
            f"--vllm-python {args.vllm_python}: no such file; point it at a venv's python"
        )
    return PlaneSettings(
        state_dir=args.state_dir,
        kubelet=KubeletSettings(**_given(args, {"crash_backoff": "backoff_s"})),
        images=ImageRules(
            **_given(
                args,
                {"testbed_image_pattern": "testbed_pattern", "vllm_image_pattern": "vllm_pattern"},
            ),
            vllm_python=vllm_lookup(args.vllm_python),
            tgi_stand_in=tgi_stand_in() if args.tgi_stand_in else None,
            sim_stand_in=(
                vllm_sim_stand_in if args.vllm_stand_in or args.gateway_stand_in else None
            ),
            pod_stand_ins=(KServeImages(),) if args.kserve_stand_in else (),
        ),
        faults=tuple(FaultRule.parse(text) for text in args.fault),
        datashim=args.datashim,
        kserve_stand_in=args.kserve_stand_in,
        gateway_stand_in=args.gateway_stand_in,
    )


def vllm_lookup(explicit: Path | None) -> Callable[[], Path]:
    """The vLLM adapter's interpreter lookup, for the emulator's kubelet (``--vllm-python``
    first): one rule for where vLLM lives, whether testbed or the emulator starts it."""
    from testbed.servers.adapters.vllm import vllm_python

    chosen = str(explicit) if explicit is not None else None
    return functools.partial(vllm_python, chosen, option="--vllm-python")


def tgi_stand_in() -> TgiStandIn:
    """The emulator's TGI/TGIS stand-in, handed the launcher flags testbed's adapters write."""
    from kubemu import Launcher, TgiStandIn
    from testbed.servers.adapters import tgi, tgis

    return TgiStandIn(
        tgi=Launcher(tgi.LAUNCHER_FLAGS, tgi.LAUNCHER_SWITCHES),
        tgis=Launcher(tgis.LAUNCHER_FLAGS),
    )


def handle_emulate(args: argparse.Namespace) -> int:
    import asyncio

    from testbed.core.errors import InputError

    shape = shape_from_args(args)
    plane = plane_from_args(args)
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: must be between 0 and 65535")
    try:
        from kubemu import Emulator, serve_until_stopped
    except ModuleNotFoundError as exc:
        if exc.name in ("aiohttp", "orjson"):
            from testbed.core.errors import MissingDependency

            raise MissingDependency(exc.name, "emulator") from None
        raise
    emulator = Emulator(shape, host=args.host, port=args.port, rbac=args.rbac)
    try:
        asyncio.run(serve_until_stopped(emulator, args.kubeconfig, plane=plane))
    except OSError as exc:
        from testbed.core.errors import InfrastructureError

        raise InfrastructureError(f"cannot serve on {args.host}:{args.port}: {exc}") from exc
    return 0
