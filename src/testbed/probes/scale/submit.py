"""The submitter: N workloads in iterations of P parallel submissions with a delay between
iterations (the seed's ``-n -p --delay``), or at a steady rate with at most P in flight.

Each workload's objects are rendered from the template and created in order; one line per
workload is appended to ``submitted.json`` as soon as its calls return. Names are
deterministic (``PREFIX-NNNNN``) and the header fixes the prefix, so a killed submitter,
rerun on the same directory, skips what it recorded and meets anything it created but did
not record as AlreadyExists — never a duplicate. Rerunning with another template or other
values on the same directory is refused: the times would mix two experiments.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.clients.kube.rest import Kube
from testbed.clients.kube.watch import now_ms
from testbed.config.scale import ScaleProbe
from testbed.core.errors import InputError, TestbedError
from testbed.core.ids import short_hash
from testbed.probes.scale import submitted as records
from testbed.probes.scale.template import RUN_LABEL, Template, workload_name

#: Kinds that ride along with a workload but are not the workload itself.
_HELPERS = {
    "Service",
    "PersistentVolumeClaim",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "PodGroup",
}


@dataclass
class Outcome:
    """What one submitter invocation did."""

    header: records.Header
    created: int = 0
    existed: int = 0
    errors: int = 0
    skipped: int = 0  # recorded by an earlier invocation
    duration_s: float = 0.0

    @property
    def rate(self) -> float:
        done = self.created + self.existed + self.errors
        return done / self.duration_s if self.duration_s > 0 else 0.0


def template_for(config: ScaleProbe, base_dir: Path) -> Template:
    if config.template is None:
        if config.gang and config.workload_type == "interactive":
            raise InputError(
                "--gang: the built-in interactive workload is one pod; use -t training or"
                " -t distributed (or a --template with a PodGroup)"
            )
        return Template.builtin(config.workload_type)
    path = Path(config.template)
    return _uses_flags(config, Template.from_file(path if path.is_absolute() else base_dir / path))


def check_template(config: ScaleProbe, base_dir: Path) -> None:
    """Render the first workload offline: a missing file, a syntax error or an unknown
    placeholder is an InputError before anything runs (``testbed validate`` too)."""
    header = records.Header(
        run="check",
        prefix="scale-check",
        namespace=config.namespace or "default",
        template="",
        fingerprint="",
    )
    template_for(config, base_dir).render(values(config, header, 0))


def _uses_flags(config: ScaleProbe, template: Template) -> Template:
    """A user template gets ``gang`` and ``priority_class`` as values; one that neither reads
    them nor has what they add would ignore the flag, so it is refused instead."""
    for flag, markers, wanted in (
        ("--gang", ("gang", "PodGroup"), config.gang),
        ("--priority-class", ("priority_class", "priorityClass"), config.priority_class),
    ):
        if wanted and not any(m in template.text for m in markers):
            raise InputError(
                f"{flag}: template {template.origin} never uses {{{{ {markers[0]} }}}} — add"
                f" a {markers[1]} to it (see examples/scale/), or drop {flag}"
            )
    return template


def values(config: ScaleProbe, header: records.Header, index: int) -> dict[str, Any]:
    """The values one workload's template is rendered with."""
    name = workload_name(header.prefix, index)
    return {
        **config.values,
        "name": name,
        "index": index,
        "run": header.run,
        "namespace": header.namespace,
        "project": header.namespace,
        "workload_type": config.workload_type,
        "workers": config.workers,
        "gpus": config.gpus,
        "pvc": config.pvc,
        "gang": config.gang,
        "priority_class": config.priority_class or "",
        "image": config.image,
        "run_seconds": config.run_seconds,
    }


def open_header(
    out_dir: Path, config: ScaleProbe, template: Template, namespace: str, prefix: str | None
) -> tuple[records.Header, records.Submitted]:
    """The directory's header (written now if new) and what it already records."""
    existing = records.load(out_dir)
    fingerprint = short_hash(
        {"template": template.text, "config": config.model_dump(mode="json", exclude=_PACING)}
    )
    if existing.header is not None:
        header = existing.header
        if header.fingerprint != fingerprint or header.namespace != namespace:
            raise InputError(
                f"{out_dir / records.SUBMITTED} was written with another template, values or"
                f" namespace ({header.template} in {header.namespace}); use a new -o directory"
                " for another experiment"
            )
        return header, existing
    run = secrets.token_hex(4)
    header = records.Header(
        run=run,
        prefix=prefix or f"scale-{run}",
        namespace=namespace,
        template=template.origin,
        workload_type=config.workload_type,
        fingerprint=fingerprint,
        values=config.values,
        started_ms=now_ms(),
    )
    header.kinds = [
        (o["apiVersion"], o["kind"]) for o in template.render(values(config, header, 0))
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / records.SUBMITTED).open("a", encoding="utf-8") as handle:
        handle.write(records.line(header))
    return header, existing


#: Fields that do not change what a workload is: a resumed submitter may change them.
_PACING = {
    *("workloads", "parallel", "delay_s", "rate", "timeout_s", "thresholds", "max_errors"),
    *("plot", "skip_errors", "head", "tail", "cleanup", "wait_for"),
}


class Submitter:
    """Submits the workloads of one output directory; ``stop`` ends it between submissions."""

    def __init__(
        self,
        kube: Kube,
        out_dir: Path,
        config: ScaleProbe,
        template: Template,
        header: records.Header,
        stop: threading.Event | None = None,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.kube, self.out_dir, self.config = kube, out_dir, config
        self.template, self.header = template, header
        self.stop = stop or threading.Event()
        self.progress = progress
        self._lock = threading.Lock()
        self._file: Any = None  # submitted.json, open while run() runs
        #: Workloads an earlier submitter of this directory recorded (see :meth:`open`).
        self.done: set[int] = set()
        self.made_namespace = False

    @classmethod
    def open(
        cls,
        kube: Kube,
        out_dir: Path,
        config: ScaleProbe,
        template: Template,
        namespace: str,
        prefix: str | None,
        stop: threading.Event | None = None,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> Submitter:
        """The one way a scale test starts (``testbed scale submit`` and the campaign probe):
        the directory's header (resumed when it has one), the namespace, the template
        checked against the cluster, and what an earlier submitter already recorded."""
        header, existing = open_header(out_dir, config, template, namespace, prefix)
        made = kube.ensure_namespace(namespace, labels(header))
        submitter = cls(kube, out_dir, config, template, header, stop, progress)
        submitter.made_namespace = made
        submitter.check()
        submitter.done = {i for i, s in existing.workloads.items() if s.status != "error"}
        return submitter

    def check(self) -> None:
        """Render workload 0 and discover its kinds: a bad template fails before anything
        is created (exit 2, naming the template and the fix)."""
        for obj in self.template.render(values(self.config, self.header, 0)):
            self.kube.info(obj["apiVersion"], obj["kind"])

    def run(self, done: set[int] | None = None) -> Outcome:
        """Submit every workload not in ``done`` (default: what :meth:`open` found)."""
        done = self.done if done is None else done
        outcome = Outcome(self.header, skipped=len(done))
        todo = [i for i in range(self.config.workloads) if i not in done]
        started = time.perf_counter()
        workers = max(self.config.parallel, 1)
        with (
            (self.out_dir / records.SUBMITTED).open("a", encoding="utf-8") as self._file,
            ThreadPoolExecutor(workers, thread_name_prefix="submit") as pool,
        ):
            try:
                if self.config.rate is None:
                    self._iterations(pool, todo, outcome)
                else:
                    self._steady(pool, todo, outcome, self.config.rate)
            finally:
                self.stop.set()  # a Ctrl-C: queued submissions are dropped, running ones end
        outcome.duration_s = time.perf_counter() - started
        return outcome

    def _iterations(self, pool: ThreadPoolExecutor, todo: list[int], outcome: Outcome) -> None:
        step = self.config.parallel
        for first in range(0, len(todo), step):
            if self.stop.is_set():
                return
            # rendered before the batch is sent: rendering is Python work that would keep
            # the first submissions' threads from stamping their acks for tens of ms
            rendered = [self._render(i) for i in todo[first : first + step]]
            batch = [pool.submit(self._one, i, objs, outcome) for i, objs in rendered]
            wait(batch)
            _raise_bug(batch)
            self.progress(f"submitted {first + len(batch)}/{len(todo)}")
            if first + step < len(todo) and self.stop.wait(self.config.delay_s):
                return

    def _steady(
        self, pool: ThreadPoolExecutor, todo: list[int], outcome: Outcome, rate: float
    ) -> None:
        start = time.perf_counter()
        running: list[Future[None]] = []
        for position, index in enumerate(todo):
            due = start + position / rate
            if self.stop.wait(max(0.0, due - time.perf_counter())):
                break
            running = [f for f in running if not f.done()]
            if len(running) >= self.config.parallel:  # never more than `parallel` in flight
                wait(running, return_when="FIRST_COMPLETED")
            running.append(pool.submit(self._one, *self._render(index), outcome))
        wait(running)
        _raise_bug(running)

    def _render(self, index: int) -> tuple[int, list[dict[str, Any]]]:
        return index, self.template.render(values(self.config, self.header, index))

    def _one(self, index: int, objects: list[dict[str, Any]], outcome: Outcome) -> None:
        if self.stop.is_set():
            return
        name = workload_name(self.header.prefix, index)
        main = _main_object(objects, name)
        expected = expected_pods(self.config)
        sent = acked = now_ms()
        status, error = "created", None
        try:
            for obj in objects:
                _, existed = self.kube.create_once(obj, self.header.namespace)
                if obj is main:  # the workload's own ack, not its helpers' (a Service after it)
                    acked = now_ms()
                    status = "existed" if existed else status
        except TestbedError as exc:  # the API refused it: recorded, shown, not retried
            status, error, acked = "error", str(exc), now_ms()
        line = records.Submission(
            index=index,
            name=name,
            namespace=self.header.namespace,
            kind=main["kind"],
            api_version=main["apiVersion"],
            objects=[
                records.ObjectRef(
                    api_version=o["apiVersion"], kind=o["kind"], name=o["metadata"]["name"]
                )
                for o in objects
            ],
            expected_pods=expected,
            sent_ms=sent,
            acked_ms=acked,
            status=status,  # type: ignore[arg-type]
            error=error,
        )
        with self._lock:
            self._file.write(records.line(line))
            self._file.flush()
            counter = status if status in ("created", "existed") else "errors"
            setattr(outcome, counter, getattr(outcome, counter) + 1)


def expected_pods(config: ScaleProbe) -> int:
    """Pods a workload has when all are there: the built-in interactive one has one."""
    builtin_single = config.template is None and config.workload_type == "interactive"
    return 1 if builtin_single else config.workers


def _main_object(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The object whose lifecycle is the workload's: named like it and not a helper."""
    for obj in objects:
        if obj["metadata"]["name"] == name and obj["kind"] not in _HELPERS:
            return obj
    return objects[-1]


def _raise_bug(futures: list[Future[None]]) -> None:
    for future in futures:
        if future.done() and not future.cancelled() and future.exception() is not None:
            raise future.exception()  # type: ignore[misc]


def selector(header: records.Header) -> str:
    return f"{RUN_LABEL}={header.run}"


def delete_all(kube: Kube, sub: records.Submitted) -> tuple[int, list[str]]:
    """Delete every object the submissions name (dependents in the background); how many
    went, and what could not be deleted and why (shown, never swallowed)."""
    gone, failed = 0, []
    for workload in sub.ordered():
        for ref in reversed(workload.objects):
            try:
                gone += kube.delete(ref.kind, ref.name, workload.namespace, ref.api_version)
            except TestbedError as exc:
                failed.append(f"{ref.kind}/{ref.name}: {exc}")
    return gone, failed


def labels(header: records.Header) -> Mapping[str, str]:
    return {RUN_LABEL: header.run, "app.kubernetes.io/managed-by": "testbed"}
