"""The sampler: watches pods, events and the workload objects of one output directory, and
merges what it sees into ``sampled.json``.

A child process lists, then watches each resource (never polls), stamping every change as
its bytes arrive (:mod:`~testbed.clients.kube.stamped`: a busy consumer never ages a
receive time); this thread consumes their queue, turns each object into facts
(:mod:`~testbed.probes.scale.sampled`) and saves the merged facts every second while anything
changed. Without ``follow`` it stops once every
list has been delivered (a snapshot, as the seed's sampler takes); with ``follow`` it keeps
watching until stopped or until ``until(facts)`` says the test is over. It can run before,
during or after the submitter, as often as wanted: the facts merge idempotently.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testbed.clients.kube.rest import KindInfo, Kube
from testbed.clients.kube.stamped import StampedWatches, WatchSpec
from testbed.clients.kube.watch import Failed, Seen, Synced
from testbed.core.errors import InputError
from testbed.probes.scale import sampled
from testbed.probes.scale.sampled import Facts
from testbed.probes.scale.submitted import Header
from testbed.probes.scale.template import RUN_LABEL

SAVE_EVERY_S = 1.0
#: Kinds whose pods carry the labels of their pod template (or are the pod), and helpers.
LABELLED_PODS = frozenset(
    {
        "Pod",
        "Job",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "DaemonSet",
        "PodGroup",
        "Service",
        "PersistentVolumeClaim",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
    }
)


@dataclass
class Stats:
    """What a sampler run processed, for the output and the benchmark."""

    listed: int = 0  # objects delivered by LISTs
    live: int = 0  # watch events (the rate that matters)
    kept_events: int = 0  # Events about this run's objects
    duration_s: float = 0.0
    cpu_s: float = 0.0  # CPU time of the sampler's threads (watchers and this consumer)
    saves: int = 0
    interrupted: bool = False
    facts: Facts | None = None

    @property
    def cpu_per_event_ms(self) -> float:
        total = self.listed + self.live
        return self.cpu_s * 1000 / total if total else 0.0


class Sampler:
    """Samples the objects of the run ``header`` describes into ``out_dir``."""

    def __init__(self, kube: Kube, out_dir: Path, header: Header) -> None:
        self.kube, self.out_dir, self.header = kube, out_dir, header
        self.facts = Facts()
        self._saver = sampled.Saver(out_dir, self.facts)
        self.queue: queue.SimpleQueue[Seen | Failed | Synced] = queue.SimpleQueue()
        self._all_pods = False  # pods watched without the run's label selector

    def _specs(self) -> list[WatchSpec]:
        namespace, chosen = self.header.namespace, f"{RUN_LABEL}={self.header.run}"
        # Controllers of other kinds may make pods without our labels: watch the namespace's
        # pods and attribute them by owner (times.rows follows the ownerReferences).
        custom = any(kind not in LABELLED_PODS for _, kind in self.header.kinds)
        self._all_pods = custom
        specs = [
            WatchSpec("pods", KindInfo("v1", "pods"), namespace, None if custom else chosen),
            WatchSpec("events", self._events_info(), namespace, None),
        ]
        for api_version, kind in dict.fromkeys(map(tuple, self.header.kinds)):
            if kind != "Pod":
                specs.append(WatchSpec(kind, self.kube.info(api_version, kind), namespace, chosen))
        return specs

    def _events_info(self) -> KindInfo:
        try:
            return self.kube.info("events.k8s.io/v1", "Event")
        except InputError:  # an old or minimal API: the core events carry the same facts
            return KindInfo("v1", "events")

    def run(
        self,
        follow: bool,
        stop: threading.Event | None = None,
        until: Callable[[Facts], bool] | None = None,
        synced: threading.Event | None = None,
    ) -> Stats:
        """Sample until the lists are in (``follow`` False), or until ``stop``/``until``;
        ``synced`` is set once every watch has listed and is live."""
        stop = stop or threading.Event()
        specs = self._specs()
        watches = StampedWatches(self.kube, specs, self.queue)
        stats = Stats()
        started, cpu0 = time.perf_counter(), time.thread_time()
        watches.start()
        try:
            self._loop(len(specs), follow, stop, until, stats, synced or threading.Event())
        except KeyboardInterrupt:
            if not follow:
                raise
            stats.interrupted = True  # Ctrl-C is how a follower is meant to end
        finally:
            watches.stop()
            watches.join()
            self._drain(stats)
            stats.facts = self._save(stats)
            stats.duration_s = time.perf_counter() - started
            # the sampler's own threads and child only: in a campaign the submitter shares
            # the process
            stats.cpu_s = time.thread_time() - cpu0 + watches.cpu_s
        return stats

    def _loop(
        self,
        watchers: int,
        follow: bool,
        stop: threading.Event,
        until: Callable[[Facts], bool] | None,
        stats: Stats,
        all_synced: threading.Event,
    ) -> None:
        synced: set[str] = set()
        dirty, last_save = False, time.perf_counter()
        merged: Facts | None = None
        while not stop.is_set():
            try:
                item = self.queue.get(timeout=0.2)
            except queue.Empty:
                item = None
            if isinstance(item, Failed):
                raise item.error
            if isinstance(item, Synced):
                synced.add(item.tag)
                if len(synced) == watchers:
                    all_synced.set()
                    if not follow:
                        return
            elif isinstance(item, Seen):
                dirty |= self._apply(item, stats)
            if time.perf_counter() - last_save >= SAVE_EVERY_S:
                if dirty:
                    merged, dirty = self._save(stats), False
                last_save = time.perf_counter()
                if until is not None and merged is not None and until(merged):
                    return

    def _apply(self, item: Seen, stats: Stats) -> bool:
        if item.live:
            stats.live += 1
        else:
            stats.listed += 1
        if item.type == "DELETED":
            return False  # a deletion ends nothing we time; the last state is already kept
        if item.tag == "pods":
            meta = item.obj.get("metadata") or {}
            labels = meta.get("labels") or {}
            ours = labels.get(RUN_LABEL) == self.header.run or meta.get("ownerReferences")
            if self._all_pods and not ours:
                return False  # another's pod in the namespace, owned by nothing of ours
            self.facts.observe_pod(item.obj, item.received_ms, item.live)
        elif item.tag == "events":
            regarding = item.obj.get("regarding") or item.obj.get("involvedObject") or {}
            if not str(regarding.get("name", "")).startswith(self.header.prefix):
                return False
            stats.kept_events += self.facts.observe_event(item.obj, item.received_ms, item.live)
        else:
            self.facts.observe_object(item.obj, item.received_ms, item.live)
        return True

    def _drain(self, stats: Stats) -> None:
        """What the watchers delivered before they stopped is kept, not dropped."""
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, Seen):
                self._apply(item, stats)

    def _save(self, stats: Stats) -> Facts:
        stats.saves += 1
        return self._saver.save()
