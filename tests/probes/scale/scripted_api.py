"""A scripted Kubernetes API server that plays pod lifecycles and records when it sent each
change: the truth the sampler's times are checked against.

It is written apart from testbed's emulator on purpose (an oracle, not a copy): it states the
API server's wire facts itself. Like kube-apiserver it writes whole-second
``creationTimestamp`` and condition times, answers LIST with ``metadata`` before ``items``,
sends BOOKMARKs to watches that allow them, and expires old resourceVersions: every
``--compact-every`` seconds it drops the open pod watches and compacts its history, so the
re-watch is refused with 410 Gone — alternately as an ERROR event in a 200 watch and as an
HTTP 410 — and changes made meanwhile are seen only by the relist.

Run: ``python -m tests.probes.scale.scripted_api --workloads N --out DIR``; it prints
``ready PORT`` once listening, waits until ``--watchers`` pod and job watches are open, plays
the script, writes ``DIR/truth.json`` when done — per workload and stage, the epoch ms a
watch was first sent the change (taken just before its bytes were written) and when it was
committed — and serves until terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

NAMESPACE = "truth"
RUN = "scripted"
PREFIX = "w"


def now_ms() -> float:
    return time.time_ns() / 1e6


def whole_second(ms: float) -> str:
    return dt.datetime.fromtimestamp(ms // 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Api:
    """Objects, their history of changes, and the open watches."""

    def __init__(self, compact_every_s: float) -> None:
        self.version = 1
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}  # (plural, name) → object
        # (rv, plural, type, obj, (workload, stage))
        self.history: list[tuple[int, str, str, dict[str, Any], tuple[str, str]]] = []
        self.horizon = 0  # resourceVersions at or below it are compacted away
        self.watches: dict[str, set[asyncio.Queue[Any]]] = {"pods": set(), "jobs": set()}
        self.compact_every_s = compact_every_s
        self.compactions = 0
        self.truth: dict[str, dict[str, float]] = {}  # workload → stage → first written
        self.committed: dict[tuple[str, str], float] = {}

    def commit(self, plural: str, obj: dict[str, Any], change: tuple[str, str]) -> None:
        """Store ``obj`` as a new version and hand it to every open watch, which notes in
        ``truth`` when it writes it (the earliest write counts; ``committed`` otherwise)."""
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        key = (plural, obj["metadata"]["name"])
        kind_of_change = "MODIFIED" if key in self.objects else "ADDED"
        self.objects[key] = obj
        event = {"type": kind_of_change, "object": obj}
        self.history.append((self.version, plural, kind_of_change, obj, change))
        line = json.dumps(event).encode() + b"\n"
        self.committed[change] = now_ms()
        for watch in self.watches[plural]:
            watch.put_nowait((line, change))

    def sent(self, change: tuple[str, str] | None) -> None:
        if change is not None:
            workload, stage = change
            self.truth.setdefault(workload, {}).setdefault(stage, now_ms())

    def compact(self) -> None:
        """Expire the history and drop the pod watches: their re-watch gets 410 Gone."""
        self.compactions += 1
        self.horizon = self.version
        self.history.clear()
        for watch in list(self.watches["pods"]):
            watch.put_nowait("gone-event" if self.compactions % 2 else "close")


def _matches(obj: dict[str, Any], selector: str | None) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def _status_410() -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "too old resource version: 1 (2)",
        "reason": "Expired",
        "code": 410,
    }


def app(api: Api) -> web.Application:
    async def discovery(request: web.Request) -> web.Response:
        group = request.match_info["group"]
        resources = {
            "batch": [{"name": "jobs", "kind": "Job", "namespaced": True, "verbs": ["list"]}],
            "events.k8s.io": [
                {"name": "events", "kind": "Event", "namespaced": True, "verbs": ["list"]}
            ],
        }.get(group)
        if resources is None:
            raise web.HTTPNotFound()
        version = f"{group}/{request.match_info['version']}"
        return web.json_response(
            {"kind": "APIResourceList", "groupVersion": version, "resources": resources}
        )

    async def collection(request: web.Request) -> web.StreamResponse:
        plural = request.match_info["plural"]
        selector = request.query.get("labelSelector")
        if request.query.get("watch") in ("true", "1"):
            return await watch(request, plural, selector)
        kind = {"pods": "PodList", "jobs": "JobList", "events": "EventList"}[plural]
        items = [o for (p, _), o in api.objects.items() if p == plural and _matches(o, selector)]
        body = {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": str(api.version)}}
        body["items"] = items  # metadata first, as the API server writes it
        return web.json_response(body)

    async def watch(request: web.Request, plural: str, selector: str | None) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or 0)
        if plural in api.watches and since < api.horizon and api.compactions % 2 == 0:
            return web.json_response(_status_410(), status=410)
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        if plural not in api.watches:  # events: nothing ever happens, bookmarks only
            await _bookmarks_only(response, api, request)
            return response
        if since < api.horizon:
            await response.write(json.dumps({"type": "ERROR", "object": _status_410()}).encode())
            return response
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for version, which, kind, obj, change in api.history:
            if which == plural and version > since and _matches(obj, selector):
                api.sent(change)
                await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        api.watches[plural].add(queue)
        timeout_s = float(request.query.get("timeoutSeconds") or 60)
        bookmarks = request.query.get("allowWatchBookmarks") == "true"
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    try:
                        async with asyncio.timeout(0.5):
                            item = await queue.get()
                    except TimeoutError:
                        if bookmarks:
                            await response.write(_bookmark(api, plural))
                        continue
                    if item == "close":
                        break
                    if item == "gone-event":
                        error = {"type": "ERROR", "object": _status_410()}
                        await response.write(json.dumps(error).encode() + b"\n")
                        break
                    line, change = item
                    if _matches(json.loads(line)["object"], selector):
                        api.sent(change)  # just before the bytes go
                        await response.write(line)
        except TimeoutError:
            pass
        finally:
            api.watches[plural].discard(queue)
        return response

    application = web.Application()
    application.router.add_get("/apis/{group}/{version}", discovery)
    application.router.add_get("/api/v1/namespaces/{ns}/{plural}", collection)
    application.router.add_get("/apis/{group}/{version}/namespaces/{ns}/{plural}", collection)
    return application


def _bookmark(api: Api, plural: str) -> bytes:
    kind = {"pods": "Pod", "jobs": "Job"}.get(plural, "Event")
    obj = {"kind": kind, "metadata": {"resourceVersion": str(api.version)}}
    return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"


async def _bookmarks_only(response: web.StreamResponse, api: Api, request: web.Request) -> None:
    timeout_s = float(request.query.get("timeoutSeconds") or 60)
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                await asyncio.sleep(0.5)
                await response.write(_bookmark(api, "events"))
    except TimeoutError:
        pass


# -- the script ---------------------------------------------------------------------------


Step = tuple[float, int, str]


def script(workloads: int, start_ms: float, span_s: float, seed: int) -> list[Step]:
    """(due epoch ms, workload, stage) for every change, in time order."""
    rng = random.Random(seed)
    steps = [
        ("created", 0, 0),
        ("pod_created", 3, 30),
        ("scheduled", 5, 200),
        ("initialized", 5, 60),
        ("running", 20, 300),
        ("ready", 5, 120),
    ]
    out = []
    for index in range(workloads):
        at = start_ms + index * span_s * 1000 / workloads
        for stage, low, high in steps:
            at += rng.uniform(low, high)
            out.append((at, index, stage))
    return sorted(out)


def _job(index: int, at_ms: float) -> dict[str, Any]:
    name = f"{PREFIX}-{index:05d}"
    return {
        "kind": "Job",
        "apiVersion": "batch/v1",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"job-{index}",
            "creationTimestamp": whole_second(at_ms),
            "labels": {"testbed.io/scale-run": RUN, "testbed.io/scale-workload": name},
        },
        "spec": {"parallelism": 1},
        "status": {},
    }


def _pod(index: int, at_ms: float) -> dict[str, Any]:
    workload = f"{PREFIX}-{index:05d}"
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": f"{workload}-pod",
            "namespace": NAMESPACE,
            "uid": f"pod-{index}",
            "creationTimestamp": whole_second(at_ms),
            "labels": {"testbed.io/scale-run": RUN, "testbed.io/scale-workload": workload},
        },
        "spec": {"containers": [{"name": "work", "image": "busybox"}]},
        "status": {"phase": "Pending", "conditions": []},
    }


def apply(api: Api, index: int, stage: str) -> None:
    """Make ``stage`` happen to workload ``index``."""
    name = f"{PREFIX}-{index:05d}"
    clock = now_ms()
    if stage == "created":
        return api.commit("jobs", _job(index, clock), (name, stage))
    if stage == "pod_created":
        return api.commit("pods", _pod(index, clock), (name, stage))
    pod = json.loads(json.dumps(api.objects[("pods", f"{name}-pod")]))
    status = pod["status"]
    condition = {"PodScheduled": "scheduled", "Initialized": "initialized", "Ready": "ready"}
    for kind, which in condition.items():
        if which == stage:
            status["conditions"].append(
                {"type": kind, "status": "True", "lastTransitionTime": whole_second(clock)}
            )
    if stage == "scheduled":
        pod["spec"]["nodeName"] = "node-1"
    if stage == "running":
        status["phase"] = "Running"
        status["containerStatuses"] = [
            {
                "name": "work",
                "ready": False,
                "state": {"running": {"startedAt": whole_second(clock)}},
            }
        ]
    return api.commit("pods", pod, (name, stage))


async def play(api: Api, steps: list[Step]) -> None:
    compact_at = now_ms() + api.compact_every_s * 1000
    for due, index, stage in steps:
        wait_ms = due - now_ms()
        if wait_ms > 0:
            await asyncio.sleep(wait_ms / 1000)
        if now_ms() >= compact_at:
            api.compact()
            compact_at = now_ms() + api.compact_every_s * 1000
        apply(api, index, stage)


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=200)
    parser.add_argument("--span", type=float, default=6.0, help="seconds over which they start")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds before the first")
    parser.add_argument("--compact-every", type=float, default=1.5)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--watchers", type=int, default=1, help="pod and job watches to await")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    api = Api(args.compact_every)
    runner = web.AppRunner(app(api), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"ready {port}", flush=True)
    while min(len(w) for w in api.watches.values()) < args.watchers:  # noqa: ASYNC110
        await asyncio.sleep(0.05)  # the samplers are listening: now the script starts
    steps = script(args.workloads, now_ms() + args.delay * 1000, args.span, args.seed)
    await play(api, steps)
    await asyncio.sleep(0.5)  # the last changes' writes
    committed: dict[str, dict[str, float]] = {}
    for (workload, stage), at in api.committed.items():
        committed.setdefault(workload, {})[stage] = at
    summary = {"sent": api.truth, "committed": committed, "compactions": api.compactions}
    (args.out / "truth.json").write_text(json.dumps(summary))
    print("done", flush=True)
    await asyncio.Event().wait()


@contextlib.contextmanager
def running(out: Path, *flags: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """This server as a child process writing to ``out``, and a kubeconfig naming it; its
    stdout (``done`` once the script is played) is the caller's to read."""
    command = [sys.executable, "-m", "tests.probes.scale.scripted_api", "--out", str(out)]
    root = Path(__file__).resolve().parents[3]
    server = subprocess.Popen([*command, *flags], cwd=root, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    try:
        port = int(server.stdout.readline().split()[1])
        kubeconfig = out / "kubeconfig"
        cluster = {"name": "s", "cluster": {"server": f"http://127.0.0.1:{port}"}}
        context = {"name": "s", "context": {"cluster": "s", "user": "u"}}
        config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
                  "users": [{"name": "u", "user": {}}], "contexts": [context],
                  "current-context": "s"}  # fmt: skip
        kubeconfig.write_text(json.dumps(config))
        yield server, kubeconfig
    finally:
        server.terminate()
        server.wait(10)
        server.stdout.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
