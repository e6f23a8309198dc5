"""Server-side apply's field ownership with more than one owner, against the answers the
Kubernetes docs give (Server-Side Apply: "Field management", "Conflicts", "Merge
strategy"), not against the emulator's own output.

The rules pinned here, as the docs state them: two managers applying the same value to a
field share it (no conflict; both are listed in ``managedFields``); a manager that stops
applying a field gives up its ownership, and the field is removed only when no other
manager still owns it; applying another value to a field someone else owns is a conflict
unless forced, and forcing takes the field from every other owner; items of a keyed list
(containers by name) are owned one by one, so dropping one's own item leaves another's.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubemu.storage.errors import ApiError
from kubemu.storage.managed import apply_config, from_fields_v1, path_string

Obj = dict[str, Any]


def _cm(data: dict[str, str] | None) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
    if data is not None:
        body["data"] = data
    return body


def _apply(live: Obj | None, applied: Obj, manager: str, force: bool = False) -> Obj:
    return apply_config(live, applied, manager, force, "v1", has_status=False)


def _owned(obj: Obj) -> dict[str, set[str]]:
    """manager → the fields it owns, written as the API server prints paths."""
    return {
        entry["manager"]: {
            path_string(p) for p in from_fields_v1(entry["fieldsV1"]) if p[-1] != "."
        }
        for entry in obj["metadata"]["managedFields"]
    }


def test_a_field_two_managers_apply_stays_when_one_stops_applying_it() -> None:
    live = _apply(None, _cm({"shared": "1", "mine": "2"}), "alice")
    live = _apply(live, _cm({"shared": "1"}), "bob")  # the same value: shared, no conflict
    assert _owned(live) == {"alice": {".data.shared", ".data.mine"}, "bob": {".data.shared"}}
    live = _apply(live, _cm({"mine": "2"}), "alice")  # alice stops applying shared
    assert live["data"] == {"shared": "1", "mine": "2"}  # bob still owns it: it stays
    assert _owned(live) == {"alice": {".data.mine"}, "bob": {".data.shared"}}
    live = _apply(live, _cm(None), "bob")  # now its last owner stops applying it
    assert live["data"] == {"mine": "2"}
    assert _owned(live) == {"alice": {".data.mine"}}


def test_a_field_only_its_manager_applied_goes_when_it_stops() -> None:
    live = _apply(None, _cm({"a": "1", "b": "2"}), "alice")
    live = _apply(live, _cm({"c": "3"}), "bob")
    live = _apply(live, _cm({"a": "1"}), "alice")
    assert live["data"] == {"a": "1", "c": "3"}


def test_another_value_for_a_shared_field_conflicts_with_every_other_owner() -> None:
    live = _apply(None, _cm({"shared": "1"}), "alice")
    live = _apply(live, _cm({"shared": "1"}), "bob")
    with pytest.raises(ApiError) as refused:
        _apply(live, _cm({"shared": "2"}), "carol")
    assert refused.value.code == 409
    causes = (refused.value.details or {})["causes"]
    assert {c["message"] for c in causes} == {'conflict with "alice"', 'conflict with "bob"'}
    assert {c["field"] for c in causes} == {".data.shared"}
    forced = _apply(live, _cm({"shared": "2"}), "carol", force=True)
    assert forced["data"] == {"shared": "2"}
    assert _owned(forced) == {"carol": {".data.shared"}}  # taken from both


def test_a_keyed_list_item_of_another_manager_stays_when_one_drops_its_own() -> None:
    def deployment(containers: list[Obj]) -> Obj:
        pod = {"spec": {"containers": containers}}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": pod},
        }

    # several apps: whether an item's key or the item itself is removed first must not
    # matter (the paths are a set, their order changes from one process to the next)
    apps = [{"name": f"app-{n}", "image": "app:1"} for n in range(8)]
    side = {"name": "side", "image": "side:1"}
    live = _apply(None, deployment(apps), "alice")
    live = _apply(live, deployment([*apps, side]), "bob")  # apps shared, side bob's alone
    live = _apply(live, deployment([side]), "alice")  # alice applies no app now
    containers = live["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == [*(a["name"] for a in apps), "side"]
    live = _apply(live, deployment([]), "bob")  # bob was the apps' last owner
    assert live["spec"]["template"]["spec"]["containers"] == [side]  # no {} left behind
