"""``testbed scale submit|sample|plot|nodes|clean``: the Run:ai scale test's three tools
(submitter, sampler, plotter) and their helpers, usable on their own as the seed uses them:
submit once, then sample and plot as often as wanted while it runs."""

from __future__ import annotations

import argparse
from typing import Any

_SUBMIT_FLAGS = (  # (flag, ScaleProbe field, type, help)
    ("--num-workloads", "workloads", int, "workloads to submit in all (-n)"),
    (
        "--num-processes",
        "parallel",
        int,
        "parallel submissions per iteration (-p); in-flight cap with --rate",
    ),
    ("--delay", "delay_s", float, "seconds between iterations"),
    ("--rate", "rate", float, "workloads per second, evenly spaced (instead of --delay)"),
    (
        "--workload-type",
        "workload_type",
        str,
        "built-in template: training, distributed, interactive (-t)",
    ),
    ("--num-workers", "workers", int, "pods of a distributed workload"),
    ("--num-gpus", "gpus", int, "GPUs per pod (-g)"),
    (
        "--run-seconds",
        "run_seconds",
        float,
        "training pods complete after this long (emulator, KWOK)",
    ),
    ("--image", "image", str, "container image of the pods"),
    ("--priority-class", "priority_class", str, "spec.priorityClassName of every pod"),
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("scale", help="cluster scale tests: submit, sample, plot (seed 003)")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    _register_submit(verbs)
    _register_sample_plot(verbs)
    _register_nodes_clean(verbs)


def _register_submit(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    submit = verbs.add_parser("submit", help="submit N workloads from a template")
    _out(submit)
    short = {
        "--num-workloads": "-n",
        "--num-processes": "-p",
        "--workload-type": "-t",
        "--num-gpus": "-g",
    }
    for flag, dest, kind, text in _SUBMIT_FLAGS:
        names = [flag, short[flag]] if flag in short else [flag]
        submit.add_argument(*names, dest=dest, type=kind, help=text)
    submit.add_argument("--template", help="YAML template (Jinja2 placeholders) of one workload")
    submit.add_argument(
        "--pvc", action="store_true", default=None, help="add a PVC to each workload"
    )
    submit.add_argument(
        "--gang",
        action="store_true",
        default=None,
        help="all of a workload's pods or none: a PodGroup with minMember = workers",
    )
    submit.add_argument(
        "--project",
        "--namespace",
        dest="namespace",
        default="testbed-scale",
        help="namespace to submit to (created if missing)",
    )
    submit.add_argument("--prefix", help="workload names are PREFIX-NNNNN (default scale-<run>)")
    submit.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a template value (or a scale field such as workers=4); repeatable",
    )
    _connection(submit)
    submit.set_defaults(handler=handle_submit)


def _register_sample_plot(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sample = verbs.add_parser("sample", help="record lifecycle times into sampled.json (watch)")
    _out(sample)
    sample.add_argument(
        "--follow", action="store_true", help="keep watching until Ctrl-C or --timeout"
    )
    sample.add_argument("--timeout", type=float, help="with --follow: stop after this many seconds")
    sample.add_argument(
        "-t",
        "--workload-type",
        choices=("training", "distributed", "interactive"),
        help="as the seed's sampler takes it: checked against what submit recorded",
    )
    sample.add_argument(
        "-p", "--project", help="as the seed's sampler takes it: checked against submit's namespace"
    )
    _connection(sample)
    sample.set_defaults(handler=handle_sample)

    plot = verbs.add_parser("plot", help="times.csv and the stage plots from what was sampled")
    _out(plot)
    plot.add_argument("--plot", choices=("general", "detailed"), default="general")
    plot.add_argument("--head", type=int, help="only the first N workloads")
    plot.add_argument("--tail", type=int, help="only the last N workloads")
    plot.add_argument(
        "--skip-errors", action="store_true", help="leave workloads in error out of the plots"
    )
    plot.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="'p99 scheduled→running < 5 s'",
        help="judge a quantile; exit 1 when one fails; repeatable",
    )
    plot.add_argument(
        "--max-errors", type=int, default=None, help="with --threshold: errors allowed"
    )
    plot.set_defaults(handler=handle_plot)


def _register_nodes_clean(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    nodes = verbs.add_parser("nodes", help="KWOK fake nodes with GPU capacity on a real cluster")
    nodes.add_argument("--count", type=int, default=10)
    nodes.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node")
    nodes.add_argument("--cpu", type=int, default=64)
    nodes.add_argument("--memory-gi", type=int, default=512)
    nodes.add_argument("--prefix", default="kwok-gpu")
    nodes.add_argument("--delete", action="store_true", help="delete the nodes this command made")
    _connection(nodes)
    nodes.set_defaults(handler=handle_nodes)

    clean = verbs.add_parser("clean", help="delete every object a submitter created")
    _out(clean)
    _connection(clean)
    clean.set_defaults(handler=handle_clean)


def _out(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output-dir", required=True, help="the test's directory")


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, then ~/.kube/config")
    parser.add_argument("--context", help="kubeconfig context")


def _kube(args: argparse.Namespace) -> Any:
    from testbed.clients.kube.connection import ConnectionSpec
    from testbed.clients.kube.rest import Kube

    return Kube.connect(ConnectionSpec(context=args.context, kubeconfig=args.kubeconfig))


def _config(args: argparse.Namespace) -> Any:
    """The flags as a validated ScaleProbe (one source of truth with the campaign)."""
    from pydantic import ValidationError

    from testbed.config.scale import ScaleProbe
    from testbed.config.yamlsource import safe_load
    from testbed.core.errors import InputError

    fields: dict[str, Any] = {d: getattr(args, d) for _, d, _, _ in _SUBMIT_FLAGS}
    fields = {k: v for k, v in fields.items() if v is not None}
    fields["template"], fields["pvc"], fields["gang"] = args.template, args.pvc, args.gang
    values: dict[str, Any] = {}
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {item!r}: write KEY=VALUE, e.g. --set workers=4")
        target = fields if key.strip() in ScaleProbe.model_fields else values
        target[key.strip()] = safe_load(raw, f"--set {item}") if raw else ""
    fields["values"] = {**fields.get("values", {}), **values}
    try:
        return ScaleProbe.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(f"scale submit: {problems}") from None


def handle_submit(args: argparse.Namespace) -> int:
    from pathlib import Path

    from testbed.probes.scale.submit import Submitter, template_for

    config = _config(args)
    out = Path(args.output_dir)
    template = template_for(config, Path.cwd())
    submitter = Submitter.open(
        _kube(args), out, config, template, args.namespace, args.prefix, progress=print
    )
    outcome = submitter.run()
    print(
        f"{outcome.created} created, {outcome.existed} existed, {outcome.errors} error(s),"
        f" {outcome.skipped} recorded before; {outcome.rate:.1f} workloads/s"
        f" → {out / 'submitted.json'}"
    )
    return 0


def handle_sample(args: argparse.Namespace) -> int:
    import signal
    import threading
    from pathlib import Path

    from testbed.core.errors import InputError
    from testbed.probes.scale import submitted
    from testbed.probes.scale.sample import Sampler

    out = Path(args.output_dir)
    header = submitted.load(out).header
    if header is None:
        raise InputError(
            f"{out}: no submitted.json with a header — run `testbed scale submit -o {out}` first"
        )
    _same_as_submitted(args, header, out)
    stop = threading.Event()
    timer = threading.Timer(args.timeout or 0, stop.set)
    timer.daemon = True  # a Ctrl-C must not wait for it
    if args.timeout:
        timer.start()
    if args.follow:
        # Ctrl-C (SIGINT) is how a follower ends, started from anywhere: Python leaves SIGINT
        # ignored when testbed inherits it ignored (a script's background job, some CI
        # runners), and the follower then ran on until --timeout whatever it was sent
        signal.signal(signal.SIGINT, signal.default_int_handler)
    sampler = Sampler(_kube(args), out, header)
    try:
        stats = sampler.run(args.follow, stop)
    finally:
        stop.set()
        timer.cancel()
    facts = stats.facts
    assert facts is not None
    print(
        f"{len(facts.pods)} pod(s), {len(facts.objects)} object(s), {len(facts.events)} event(s);"
        f" {stats.live} watch event(s), {stats.listed} listed, {stats.cpu_per_event_ms:.3f} ms CPU"
        f" each → {out / 'sampled.json'}"
    )
    return 0


def _same_as_submitted(args: argparse.Namespace, header: Any, out: Any) -> None:
    """The seed's sampler names the type and project again; a mismatch is a mistake."""
    from testbed.core.errors import InputError

    recorded = {"workload type": header.workload_type, "project": header.namespace}
    given = {"workload type": args.workload_type, "project": args.project}
    for what, value in given.items():
        if value and recorded[what] and value != recorded[what]:
            raise InputError(
                f"{out} was submitted with {what} {recorded[what]!r}, not {value!r} — drop the"
                " flag (the sampler reads it from submitted.json) or use the right -o directory"
            )


def handle_plot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pydantic import ValidationError

    from testbed.config.scale import StageThreshold
    from testbed.core.errors import InputError
    from testbed.probes.scale.analysis import analyze, lines
    from testbed.results.verdict import Status, exit_code

    try:
        thresholds = [StageThreshold.model_validate(t) for t in args.threshold]
    except ValidationError as exc:
        raise InputError(f"--threshold: {exc.errors()[0]['msg']}") from None
    out = Path(args.output_dir)
    result = analyze(
        out,
        plot=args.plot,
        head=args.head,
        tail=args.tail,
        skip_errors=args.skip_errors,
        thresholds=thresholds,
        max_errors=args.max_errors if args.max_errors is not None else 10**9,
    )
    for line in lines(result):
        print(line)
    print("wrote " + ", ".join(str(out / f) for f in result.files))
    if not thresholds:
        return 0
    assert result.verdict is not None
    print(f"{result.verdict.status.value}: {result.verdict.reason}")
    # a threshold no workload reached the start of measured nothing: when none measured
    # anything, the thresholds tested nothing (exit 5; FAIL on errors and ERROR keep theirs)
    checks = result.verdict.evidence.get("thresholds") or []
    tested = any(c["reached"] + c["waiting"] for c in checks)
    if not tested and result.verdict.status not in (Status.ERROR, Status.FAIL):
        print("nothing was tested: no workload reached the start of any threshold (exit 5)")
    return exit_code(result.verdict.status, tested=tested)


def handle_nodes(args: argparse.Namespace) -> int:
    from testbed.probes.scale.kwok import create_nodes, delete_nodes

    kube = _kube(args)
    if args.delete:
        print(f"{delete_nodes(kube)} node(s) deleted")
        return 0
    created, existed = create_nodes(
        kube, args.count, args.gpus, prefix=args.prefix, cpu=args.cpu, memory_gi=args.memory_gi
    )
    print(f"{created} KWOK node(s) with {args.gpus} GPU(s) each created, {existed} existed")
    return 0


def handle_clean(args: argparse.Namespace) -> int:
    from pathlib import Path

    from testbed.probes.scale import submitted
    from testbed.probes.scale.submit import delete_all
    from testbed.results.verdict import Status, exit_code

    gone, failed = delete_all(_kube(args), submitted.load(Path(args.output_dir)))
    print(f"{gone} object(s) deleted")
    for line in failed:
        print(f"could not delete {line}")
    return exit_code(Status.ERROR if failed else Status.PASS)
