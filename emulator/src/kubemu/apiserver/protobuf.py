"""Kubernetes protobuf request bodies decoded to the JSON form of the same object.

kubectl's typed commands (``create namespace``, ``create deployment``, ``run``,
``expose``…) send ``application/vnd.kubernetes.protobuf``: the magic ``k8s\\0`` and a
``runtime.Unknown`` envelope whose ``raw`` bytes are the object. Field numbers, names and
types come from ``protobuf_schema.json`` (extracted from Kubernetes' generated.proto files
by scripts/emulator_protobuf_schema.py). Kinds without a schema are refused with 415.
Empty strings, lists and maps are dropped, as Go's JSON ``omitempty`` drops them.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from functools import cache
from importlib import resources
from typing import Any

from kubefacts.times import MICROS, SECONDS, format_time
from kubemu.storage.errors import ApiError, bad_request, unsupported_media

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_INTS = {"int32", "int64", "uint32", "uint64"}
Field = list[str]


@cache
def _schema() -> dict[str, Any]:
    text = resources.files("kubemu.apiserver").joinpath("protobuf_schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise bad_request("truncated protobuf body")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field: ints for varints, bytes otherwise."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = data[pos : pos + width], pos + width
        else:
            raise bad_request(f"unsupported protobuf wire type {wire}")
        out.append((number, wire, value))
    return out


def _scalar(kind: str, wire: int, value: Any) -> Any:
    if kind == "string":
        return bytes(value).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "bool":
        return bool(value)
    if kind in _INTS:
        if wire == 2:  # packed repeated ints are handled by the caller
            raise bad_request("unexpected packed value")
        return value - (1 << 64) if kind in ("int32", "int64") and value >= 1 << 63 else value
    if kind in ("double", "float"):
        import struct

        return struct.unpack("<d" if len(value) == 8 else "<f", value)[0]
    raise bad_request(f"unsupported protobuf type {kind}")


def _special(name: str, data: bytes) -> tuple[bool, Any]:
    """Messages whose JSON form is not an object (times, quantities, int-or-string …)."""
    if name in (f"{_META}.Time", f"{_META}.MicroTime"):
        values = {n: v for n, _, v in _fields(data)}
        seconds, nanos = values.get(1, 0), values.get(2, 0)
        if not seconds and not nanos:
            return True, None
        when = _dt.datetime.fromtimestamp(seconds, _dt.UTC).replace(microsecond=nanos // 1000)
        micro = name.endswith("MicroTime")
        return True, format_time(when, MICROS if micro else SECONDS)
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        return True, next((bytes(v).decode() for n, _, v in _fields(data) if n == 1), None)
    if name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        values = {n: v for n, _, v in _fields(data)}
        return True, bytes(values.get(3, b"")).decode() if values.get(1) == 1 else values.get(2, 0)
    if name == "k8s.io.apimachinery.pkg.runtime.RawExtension":
        raw = next((bytes(v) for n, _, v in _fields(data) if n == 1), b"")
        return True, json.loads(raw) if raw else None
    if name == f"{_META}.FieldsV1":
        return True, None
    return False, None


def _value(kind: str, wire: int, value: Any) -> Any:
    if kind in _schema()["messages"] or "." in kind:
        return _message(kind, bytes(value))
    return _scalar(kind, wire, value)


def _message(name: str, data: bytes) -> Any:
    special, converted = _special(name, data)
    if special:
        return converted
    schema: dict[str, Field] | None = _schema()["messages"].get(name)
    if schema is None:
        raise unsupported_media(f"{MEDIA_TYPE} (no schema for {name}; send JSON)")
    out: dict[str, Any] = {}
    for number, wire, raw in _fields(data):
        field = schema.get(str(number))
        if field is None:
            raise unsupported_media(f"{MEDIA_TYPE} (unknown field {number} of {name}; send JSON)")
        fname, label = field[0], field[1]
        if label == "map":
            entry = {n: (w, v) for n, w, v in _fields(bytes(raw))}
            key = _value(field[2], *entry[1]) if 1 in entry else ""
            out.setdefault(fname, {})[key] = _value(field[3], *entry[2]) if 2 in entry else ""
        elif label == "repeated":
            items = out.setdefault(fname, [])
            if wire == 2 and field[2] in _INTS | {"bool"}:
                pos = 0
                while pos < len(raw):
                    item, pos = _varint(bytes(raw), pos)
                    items.append(_scalar(field[2], 0, item))
            else:
                items.append(_value(field[2], wire, raw))
        else:
            out[fname] = _value(field[2], wire, raw)
    return {k: v for k, v in out.items() if v not in ("", None, [], {})}


def decode(body: bytes) -> dict[str, Any]:
    """The JSON-form object of a protobuf request body; 415 for kinds it cannot decode."""
    if not body.startswith(MAGIC):
        raise bad_request("a protobuf body must start with the k8s\\0 magic")
    envelope = {n: v for n, _, v in _fields(body[len(MAGIC) :])}
    type_meta = {n: bytes(v).decode() for n, _, v in _fields(bytes(envelope.get(1, b"")))}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    message = _schema()["kinds"].get(f"{api_version}/{kind}")
    if message is None:
        raise unsupported_media(f"{MEDIA_TYPE} for {api_version} {kind} (send JSON)")
    try:
        obj = _message(message, bytes(envelope.get(2, b"")))
    except ApiError:
        raise
    except (ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
        raise bad_request(f"cannot decode the protobuf body of {kind}: {exc}") from exc
    return {"apiVersion": api_version, "kind": kind, **obj}
