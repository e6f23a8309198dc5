"""What testbed needs on a cluster, per feature: the table of docs/kubernetes.md ("What
testbed needs on your cluster"), computed by the code that writes an exported runner's Role
(:func:`.rbac.worker_rules`) from a minimal campaign per feature. The first row is a plain
run in a given namespace; each other row holds only what its feature adds to that.
tests/backends/kubernetes/test_rights.py requires the doc's table to equal :func:`table`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

from testbed.backends.kubernetes.rbac import Rule, worker_rules
from testbed.config.loader import load_campaign

NAMESPACE = "the-namespace"  # shown as the name the Datashim label patches
#: The table's first row: one simulator Deployment in a given namespace.
PLAIN: dict[str, object] = {
    "name": "rights",
    "backend": {"kind": "kubernetes", "namespace": NAMESPACE},
    "deployments": [{"name": "sim", "server": "sim"}],
    "load": {"profile": "concurrency", "concurrency": 1, "requests": 1,
             "dataset": {"kind": "synthetic", "input_tokens": 4, "output_tokens": 2}},
}  # fmt: skip
#: A stack as small as they come: a Deployment waited for and the Service reached.
STACK = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: web}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{name: http, port: 80}]}
"""
#: feature → what it changes in :data:`PLAIN` (backend settings, the deployment's fields).
FEATURES: list[tuple[str, dict[str, object], dict[str, object]]] = [
    ("every run, in `backend.namespace` (servers, logs, port-forwards, cleanup)", {}, {}),
    ("S3 model weights (`model: s3://…`)", {}, {"model": "s3://bucket/model"}),
    ("a hub token (`backend.hf_token`)", {"hf_token": "${env:HF_TOKEN}"}, {}),
    ("Datashim (`backend.datashim: true`)", {"datashim": True},
     {"model": "s3://bucket/model", "s3_endpoint_url": "http://minio:9000"}),
    ("probes in the cluster (`backend.probes: cluster`)", {"probes": "cluster"}, {}),
    ("a stack (`server: manifests`): each namespaced kind it renders; here a Deployment"
     " waited for and a Service", {},
     {"server": "manifests", "manifests": "stack.yaml", "model": "m",
      "ready": [{"kind": "Deployment", "name": "web", "condition": "Available"}],
      "endpoint": {"service": "web", "port": "http"}}),
]  # fmt: skip


def feature_rules() -> Iterator[tuple[str, list[Rule]]]:
    """(feature, the Role rules it needs beyond a plain run's; all of them for the first)."""
    with tempfile.TemporaryDirectory(prefix="testbed-rights-") as folder:
        base = Path(folder)
        (base / "stack.yaml").write_text(STACK)
        plain: list[Rule] = []
        for feature, backend, deployment in FEATURES:
            campaign = dict(PLAIN)
            campaign["backend"] = {"kind": "kubernetes", "namespace": NAMESPACE, **backend}
            campaign["deployments"] = [{"name": "sim", "server": "sim", **deployment}]
            path = base / "campaign.yaml"
            path.write_text(yaml.safe_dump(campaign))
            rules = worker_rules(load_campaign(path), NAMESPACE)
            if not plain:
                plain = rules
                yield feature, rules
                continue
            added = [_beyond(rule, plain) for rule in rules]
            yield feature, [rule for rule in added if rule is not None]


def _beyond(rule: Rule, plain: list[Rule]) -> Rule | None:
    """``rule`` without the verbs a plain run's rule of the same resource already holds."""
    same = [p for p in plain if _key(p) == _key(rule)]
    held = {v for p in same for v in p["verbs"]}
    verbs = [v for v in rule["verbs"] if v not in held]
    return {**rule, "verbs": verbs} if verbs else None


def _key(rule: Rule) -> tuple[str, str, tuple[str, ...]]:
    return (rule["apiGroups"][0], rule["resources"][0], tuple(rule.get("resourceNames") or ()))


def table() -> list[str]:
    """The Markdown table: a feature's name on its first rule's row."""
    lines = ["| feature | API group | resource | verbs |", "|---|---|---|---|"]
    for feature, rules in feature_rules():
        for index, rule in enumerate(rules):
            names = rule.get("resourceNames")
            resource = f"`{rule['resources'][0]}`" + (
                f" named {', '.join(f'`{n}`' for n in names)}" if names else ""
            )
            group = f"`{rule['apiGroups'][0]}`" if rule["apiGroups"][0] else "core"
            verbs = ", ".join(rule["verbs"])
            lines.append(f"| {feature if index == 0 else ''} | {group} | {resource} | {verbs} |")
    return lines
