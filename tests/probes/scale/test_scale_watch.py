"""The sampler's Watcher: list, then watch from that resourceVersion; bookmarks move the
version silently; 410 Gone lists again; lines split across reads are whole events; listed
objects are not live — against an in-memory seam of the API."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from testbed.clients.kube.rest import KindInfo
from testbed.clients.kube.watch import Seen, Synced, Watcher
from testbed.probes.scale.sample import Sampler, Stats
from testbed.probes.scale.submitted import Header


class FakeRaw:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        text = b"".join(json.dumps(e).encode() + b"\n" for e in events)
        self.chunks = [text[i : i + 7] for i in range(0, len(text), 7)]  # lines split across reads

    def stream(self, size: int, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakeKube:
    def __init__(
        self,
        lists: list[tuple[list[dict[str, Any]], str]],
        watches: list[list[dict[str, Any]]],
        on_last: Any,
    ) -> None:
        self.lists, self.watches, self.versions, self.on_last = lists, watches, [], on_last

    def list_collection(self, info: KindInfo, namespace: str | None, selector: str | None) -> Any:
        return self.lists.pop(0)

    def request(self, method: str, path: str, doing: str, **kwargs: Any) -> FakeRaw:
        self.versions.append(kwargs["query"]["resourceVersion"])
        if not self.watches:
            self.on_last()
            return FakeRaw([])
        return FakeRaw(self.watches.pop(0))


def pod(name: str, version: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "resourceVersion": version}}


def test_list_watch_bookmark_gone_relist() -> None:
    out: queue.SimpleQueue[Any] = queue.SimpleQueue()
    watches = [
        [
            {"type": "ADDED", "object": pod("b", "2")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
            {"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "too old"}},
        ],
        [{"type": "MODIFIED", "object": pod("b", "6")}],
    ]
    holder: list[Watcher] = []
    lists = [([pod("a", "1")], "1"), ([pod("a", "1"), pod("b", "4")], "5")]
    kube = FakeKube(lists, watches, lambda: holder[0].stop())  # noqa: PLW0108 - filled below
    watcher = Watcher(kube, KindInfo("v1", "pods"), "ns", "x=y", out, "pods")  # type: ignore[arg-type]
    holder.append(watcher)
    watcher.start()
    watcher.join(timeout=10)
    assert not watcher.is_alive()
    items = []
    while not out.empty():
        item = out.get()
        items.append(
            ("synced",)
            if isinstance(item, Synced)
            else (item.type, item.obj["metadata"]["name"], item.live)
        )
        if isinstance(item, Seen):
            assert item.received_ms > 1.7e12
    assert items == [
        ("ADDED", "a", False),
        ("synced",),
        ("ADDED", "b", True),
        ("ADDED", "a", False),
        ("ADDED", "b", False),
        ("synced",),
        ("MODIFIED", "b", True),
    ]
    assert kube.versions[:3] == ["1", "5", "6"]  # resumed after the list, relisted after 410
    assert watcher.events == 2


@pytest.mark.timing
def test_sampler_takes_in_far_more_than_500_events_per_second(tmp_path: Path) -> None:
    """Parsing each line (the watcher's part) and turning it into facts (the consumer's) for
    pods going through their stages and their events: CPU per event, on this thread."""
    header = Header(run="r", prefix="w", namespace="ns", template="t", fingerprint="f")
    sampler = Sampler(None, tmp_path, header)  # type: ignore[arg-type]
    lines = []
    for i in range(1000):
        name = f"w-{i:05d}-abcde"
        for phase, conditions in (
            ("Pending", ["PodScheduled"]),
            ("Running", ["PodScheduled", "Initialized", "Ready"]),
        ):
            obj = {
                "metadata": {
                    "name": name,
                    "namespace": "ns",
                    "creationTimestamp": "2026-11-23T20:00:00Z",
                    "labels": {"testbed.io/scale-workload": name[:7]},
                },
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
                "status": {
                    "phase": phase,
                    "conditions": [
                        {"type": c, "status": "True", "lastTransitionTime": "2026-11-23T20:00:01Z"}
                        for c in conditions
                    ],
                    "containerStatuses": [
                        {"name": "c", "state": {"running": {"startedAt": "2026-11-23T20:00:01Z"}}}
                    ],
                },
            }
            lines.append(("pods", json.dumps({"type": "MODIFIED", "object": obj}).encode()))
        for reason in ("Scheduled", "Pulled", "Created", "Started"):
            event = {
                "metadata": {"uid": f"{name}-{reason}"},
                "reason": reason,
                "eventTime": "2026-11-23T20:00:01.123456Z",
                "regarding": {"kind": "Pod", "name": name, "namespace": "ns"},
            }
            lines.append(("events", json.dumps({"type": "ADDED", "object": event}).encode()))
    stats = Stats()
    started = time.thread_time()
    for tag, line in lines:
        event = orjson.loads(line)
        sampler._apply(Seen(tag, event["type"], event["object"], 1.8e12, True), stats)
    cpu = time.thread_time() - started
    rate = len(lines) / cpu
    assert len(sampler.facts.pods) == 1000
    assert len(sampler.facts.events) == 4000
    assert rate > 5000, f"{rate:.0f} events/s on one core"  # ten times what is needed
