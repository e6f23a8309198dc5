"""What RBAC costs the emulator's API server per request: GETs of one pod, and lists of a
namespace's pods, with the admin token (``system:masters``: no rule is read) and with a
ServiceAccount token whose rights come from a RoleBinding among BINDINGS other bindings
(each request walks the ClusterRoleBindings and the namespace's RoleBindings, as the RBAC
authorizer does without its cache). In-process emulator over HTTPS; one client, sequential
requests, so the figures are latencies on a shared machine, not capacity.

    .venv/bin/python bench/emulator_rbac.py [--requests 2000] [--bindings 200]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ssl
import statistics
import time
from typing import Any

import aiohttp

from kubemu import ClusterShape, Emulator

RBAC = "rbac.authorization.k8s.io"


def _seed(emu: Emulator, bindings: int) -> None:
    store = emu.store
    store.create("namespaces", {"metadata": {"name": "team"}})
    store.create("serviceaccounts", {"metadata": {"name": "runner"}}, "team")
    store.create("pods", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "x"}]}}, "team")  # fmt: skip
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    store.create(f"roles.{RBAC}", {"metadata": {"name": "r"}, "rules": rules}, "team")
    for i in range(bindings):
        subject = {"kind": "ServiceAccount", "name": f"other-{i}", "namespace": "team"}
        ref = {"apiGroup": RBAC, "kind": "Role", "name": "r"}
        body: dict[str, Any] = {
            "metadata": {"name": f"b{i}"},
            "roleRef": ref,
            "subjects": [subject],
        }
        store.create(f"rolebindings.{RBAC}", body, "team")
        body = {**body, "roleRef": {**ref, "kind": "ClusterRole"}}
        store.create(f"clusterrolebindings.{RBAC}", body)
    subject = {"kind": "ServiceAccount", "name": "runner", "namespace": "team"}
    body = {"metadata": {"name": "runner"}, "subjects": [subject],
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "r"}}  # fmt: skip
    store.create(f"rolebindings.{RBAC}", body, "team")


async def _timed(session: aiohttp.ClientSession, url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        async with session.get(url) as resp:
            await resp.read()
            assert resp.status == 200, resp.status
        out.append((time.perf_counter() - start) * 1000)
    return out


async def main(requests: int, bindings: int) -> None:
    async with Emulator(ClusterShape(nodes=1)) as emu:
        _seed(emu, bindings)
        sa = emu.store.get("serviceaccounts", "team", "runner")
        token = emu.api.authn.token_request(sa, {})["status"]["token"]
        ca = base64.b64decode(
            emu.kubeconfig()["clusters"][0]["cluster"]["certificate-authority-data"]
        ).decode()
        context = ssl.create_default_context(cadata=ca)
        print(f"{requests} sequential requests each; {bindings} other RoleBindings and"
              f" {bindings} ClusterRoleBindings stored")  # fmt: skip
        for who, bearer in (("admin", emu.token), ("serviceaccount", token)):
            headers = {"Authorization": f"Bearer {bearer}"}
            async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=context), headers=headers
            ) as session:
                for what, path in (("get pod", "/pods/p"), ("list pods", "/pods")):
                    url = f"{emu.url}/api/v1/namespaces/team{path}"
                    await _timed(session, url, 50)  # warm up
                    ms = sorted(await _timed(session, url, requests))
                    print(f"{who:15s} {what:10s} median {statistics.median(ms):.3f} ms"
                          f"  p99 {ms[int(len(ms) * 0.99) - 1]:.3f} ms")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--bindings", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.bindings))
