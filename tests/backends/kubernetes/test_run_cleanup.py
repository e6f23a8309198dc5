"""A run's cleanup and its Secrets: they are deleted by the names the run recorded in its
objects marker as it applied them, each only when it still carries the run's label, and
Secrets are never listed (a LIST returns every Secret's value; the runner's Role does not
grant it). A fake API records every call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from testbed.backends.kubernetes.names import RUN, label_value
from testbed.backends.kubernetes.run_cleanup import (
    delete_run_objects,
    record_secret,
    recorded_secrets,
)

RUN_ID = "run-7"
NAMESPACE = "team"


class FakeKube:
    """Secrets by name (each with its labels) and the calls made, as the backend's Kube."""

    def __init__(self, secrets: dict[str, dict[str, str]]) -> None:
        self.secrets = secrets
        self.calls: list[tuple[Any, ...]] = []

    def delete_labelled(self, kinds: list[str], namespace: str, selector: str) -> list[str]:
        self.calls.append(("delete_labelled", tuple(kinds), namespace, selector))
        return []

    def list_served(self, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        self.calls.append(("list", kind, namespace, selector))
        return []

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        self.calls.append(("get", kind, name, namespace))
        if kind != "Secret" or name not in self.secrets:
            return None
        return {"metadata": {"name": name, "labels": self.secrets[name]}}

    def delete(self, kind: str, name: str, namespace: str) -> bool:
        self.calls.append(("delete", kind, name, namespace))
        return self.secrets.pop(name, None) is not None if kind == "Secret" else False


def test_the_marker_holds_the_secrets_a_run_applied(tmp_path: Path) -> None:
    marker = tmp_path / "objects"
    assert recorded_secrets(marker) == set()  # no marker: nothing applied
    marker.write_text("Deployment tb-d0\n")  # the marker's other lines are not Secrets
    record_secret(marker, "testbed-s3")
    record_secret(marker, "testbed-hf-token")
    record_secret(marker, "testbed-s3")  # applied again by a resumed run
    assert recorded_secrets(marker) == {"testbed-s3", "testbed-hf-token"}
    assert marker.read_text().startswith("Deployment tb-d0\n")


def test_cleanup_deletes_the_recorded_secrets_of_the_run_by_name_only(tmp_path: Path) -> None:
    ours = {RUN: label_value(RUN_ID)}
    kube = FakeKube({
        "testbed-s3": dict(ours),  # recorded and the run's: deleted
        "testbed-hf-token": {RUN: "another-run"},  # recorded, but another run's now: kept
        "unrecorded": dict(ours),  # the run's label, never recorded: never found
        "team-db": {},  # the namespace's own Secret
    })  # fmt: skip
    marker = tmp_path / "objects"
    record_secret(marker, "testbed-s3")
    record_secret(marker, "testbed-hf-token")
    done = asyncio.run(
        delete_run_objects(
            kube,  # type: ignore[arg-type]
            RUN_ID, tmp_path, NAMESPACE, False, False, recorded_secrets(marker),
        )
    )  # fmt: skip
    assert done == [f"deleted Secret/testbed-s3 in {NAMESPACE}"]
    assert sorted(kube.secrets) == ["team-db", "testbed-hf-token", "unrecorded"]
    deleted = [c for c in kube.calls if c[0] == "delete"]
    assert deleted == [("delete", "Secret", "testbed-s3", NAMESPACE)]
    # Secrets are read one by one by name, never listed nor swept by label
    assert not any(c[0] in ("list", "delete_labelled") and "Secret" in str(c) for c in kube.calls)
    read = {c[2] for c in kube.calls if c[:2] == ("get", "Secret")}
    assert read == {"testbed-s3", "testbed-hf-token"}


def test_a_run_that_recorded_no_secret_touches_none(tmp_path: Path) -> None:
    kube = FakeKube({"team-db": {RUN: label_value(RUN_ID)}})
    done = asyncio.run(
        delete_run_objects(
            kube,  # type: ignore[arg-type]
            RUN_ID, tmp_path, NAMESPACE, False, False, recorded_secrets(tmp_path / "objects"),
        )
    )  # fmt: skip
    assert done == []
    assert kube.secrets == {"team-db": {RUN: label_value(RUN_ID)}}
    assert not any("Secret" in str(c) for c in kube.calls)
