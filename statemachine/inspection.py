"""Section bodies as plain JSON-able values, for `rmqctl snapshot inspect`, the audit and semantic diffs.

Decoding goes through the managers' own `load_snapshot`, so inspection accepts exactly what a node would
load (and raises the same ValueError for what it would refuse).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from statemachine.alarms import AlarmTable
from statemachine.config import ReplicatedConfig
from statemachine.features import FeatureTable
from statemachine.kv import KvConfigManager
from statemachine.liveness import BrokerLiveTable
from statemachine.sections import SECTION_NAMES
from statemachine.tables import ReplicaTable, SyncStateTable
from statemachine.values import JSON, JSONObject


class Section(Protocol):
    """A snapshot section's manager, as inspection uses it."""

    def section_type(self) -> int: ...
    def load_snapshot(self, body: bytes) -> None: ...
    def to_json(self) -> JSONObject: ...


_MANAGERS: dict[int, Callable[[], Section]] = {
    m().section_type(): m
    for m in (
        ReplicaTable,
        SyncStateTable,
        BrokerLiveTable,
        KvConfigManager,
        ReplicatedConfig,
        AlarmTable,
        FeatureTable,
    )
}


def decode_section(section_type: int, body: bytes) -> JSON:
    """One section body as JSON-able dicts and lists (keys sorted). KeyError for an unknown section type,
    ValueError for a body that does not decode."""
    manager = _MANAGERS[section_type]()
    manager.load_snapshot(body)
    return manager.to_json()


def decode_sections(sections: Mapping[int, bytes]) -> JSONObject:
    """{section name: decoded content} for every section of a snapshot (e.g. `snapshot.decode_file` output)."""
    return {SECTION_NAMES[t]: decode_section(t, sections[t]) for t in sorted(sections)}


def diff_values(a: JSON, b: JSON, path: str = "") -> list[JSONObject]:
    """Where two decoded values differ: [{"path", "a", "b"}], a missing side as None, paths like
    `broker-a/brokerIdTable/1/brokerAddress`; lists are compared item by item."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[JSONObject] = []
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}/{k}" if path else str(k)
            if k not in a or k not in b:
                out.append({"path": sub, "a": a.get(k), "b": b.get(k)})
            else:
                out.extend(diff_values(a[k], b[k], sub))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out.extend(diff_values(x, y, f"{path}/{i}" if path else str(i)))
        return out
    return [] if a == b and type(a) is type(b) else [{"path": path, "a": a, "b": b}]


def diff_sections(a: Mapping[int, bytes], b: Mapping[int, bytes]) -> list[JSONObject]:
    """The semantic differences between two snapshots' sections, each with its section name in front of the
    path. Equal bytes are skipped without decoding."""
    out: list[JSONObject] = []
    for t in sorted(set(a) | set(b)):
        name = SECTION_NAMES.get(t, str(t))
        if t not in a or t not in b:
            out.append({"path": name, "a": None if t not in a else "present", "b": None if t not in b else "present"})
        elif a[t] != b[t]:
            out.extend(diff_values(decode_section(t, a[t]), decode_section(t, b[t]), name))
    return out
