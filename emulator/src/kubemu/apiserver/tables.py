"""Server-side printing: ``meta.k8s.io/v1 Table`` answers for kubectl.

kubectl asks ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the
columns it gets back. The built-in kinds get the real server's printers
(:mod:`.printers`); custom resources get their CRD's ``additionalPrinterColumns`` (simple
``.a.b`` paths) or NAME and AGE.
"""

from __future__ import annotations

from typing import Any

from kubefacts.times import human_age
from kubemu.apiserver.printers import PRINTERS, Obj, Printer, name_and_age
from kubemu.storage.resources import ResourceType
from kubemu.storage.selectors import field_value


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _printer(rt: ResourceType) -> Printer:
    if rt.key in PRINTERS and rt.group != "events.k8s.io":
        return PRINTERS[rt.key]
    if rt.printer_columns:
        columns = (("Name", "string", 0), *tuple((n, t, 0) for n, t, _ in rt.printer_columns))
        paths = [p.lstrip(".") for _, _, p in rt.printer_columns]

        def row(obj: Obj) -> list[Any]:
            cells: list[Any] = [obj["metadata"]["name"]]
            for (_, kind, _), path in zip(rt.printer_columns, paths, strict=True):
                value = field_value(obj, path)
                cells.append(human_age(value) if kind == "date" and value else value)
            return cells

        return columns, row
    return name_and_age()


def table(
    rt: ResourceType, items: list[Obj], resource_version: str, include: str = "Metadata"
) -> Obj:
    """A Table of ``items`` with each row's object as ``include`` asks (None|Metadata|Object)."""
    columns, row = _printer(rt)
    rows = []
    for obj in items:
        entry: Obj = {"cells": row(obj)}
        if include == "Object":
            entry["object"] = obj
        elif include != "None":
            entry["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(entry)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {
                "name": name,
                "type": kind,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": prio,
            }
            for name, kind, prio in columns
        ],
        "rows": rows,
    }
