"""The controller state as operators read it: every section of a snapshot decoded and checked, rows per
table, and the decoded tables as row blocks for the table and text modes (JSON keeps the decoded shape of
`statemachine.inspection`, which the Spark audit and `snapshot diff` use too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cli.rmqctl.output import Block
from snapshot.errors import SnapshotFormatError
from snapshot.format import CODEC_NAMES, HEADER_SIZE, SectionEntry
from snapshot.rw import SnapshotReader
from statemachine.inspection import decode_section
from statemachine.liveness import ROW_FIELDS
from statemachine.sections import OPTIONAL_SECTIONS, SECTION_NAMES
from statemachine.values import JSON, JSONObject

# What a table's "rows" are, per section: broker sets, live brokers, KV keys, explicitly set config keys.
_ROW_COUNT: dict[str, Callable[[JSON], int]] = {
    "replicaInfoTable": len,
    "syncStateSetInfoTable": len,
    "brokerLiveTable": lambda d: len(d["brokers"]),
    "kvConfig": lambda d: sum(len(keys) for keys in d.values()),
    "controllerConfig": lambda d: len(d["explicit"]),
}

# Exceptions a manager's load_snapshot raises for a body it cannot decode (as in snapshot.rw.load_managers).
_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError)


@dataclass(frozen=True)
class Section:
    entry: SectionEntry
    name: str
    decoded: JSON

    def row(self) -> JSONObject:
        e = self.entry
        return {
            "type": e.type,
            "name": self.name,
            "codec": CODEC_NAMES.get(e.codec, str(e.codec)),
            "rows": _ROW_COUNT.get(self.name, len)(self.decoded),
            "rawBytes": e.raw_length,
            "storedBytes": e.stored_length,
            "offset": e.offset,
            "crc32c": e.crc32c,
        }


def read_sections(reader: SnapshotReader, *, require_all: bool = True) -> list[Section]:
    """Read, CRC-check, decompress and decode every section, in file order. Damage is a
    SnapshotFormatError naming the file, the section and its first byte; with `require_all`, so is a
    missing section (a node could not load the snapshot)."""
    out: list[Section] = []
    for e in reader.entries:
        body = reader.section(e.type)
        name = SECTION_NAMES.get(e.type, str(e.type))
        try:
            decoded = decode_section(e.type, body)
        except _DECODE_ERRORS as err:
            reason = f"the section does not decode: {err!r}"
            raise SnapshotFormatError(reader.path, e.offset, reason, section=e.type, section_name=name) from err
        out.append(Section(e, name, decoded))
    if require_all:
        missing = [t for t in SECTION_NAMES if t not in reader and t not in OPTIONAL_SECTIONS]
        if missing:
            names = ", ".join(f"{t} ({SECTION_NAMES[t]})" for t in missing)
            raise SnapshotFormatError(reader.path, HEADER_SIZE, f"the section table lacks section {names}")
    return out


def tables_of(sections: list[Section]) -> JSONObject:
    """{section name: decoded}, sorted by section type: the shape of `inspection.decode_sections`."""
    return {s.name: s.decoded for s in sorted(sections, key=lambda s: s.entry.type)}


def state_blocks(tables: JSONObject) -> list[Block]:
    """The decoded tables as row blocks, one per table (two for the live table when re-elections are owed)."""
    blocks: list[Block] = []
    for name, d in tables.items():
        if name == "replicaInfoTable":
            cols = ["brokerName", "clusterName", "brokerId", "brokerAddress", "registerCheckCode", "nextAssignBrokerId"]
            rows = []
            for s in d.values():
                ids = s["brokerIdTable"] or {"": {"brokerAddress": None, "registerCheckCode": None}}
                for bid, b in ids.items():
                    rows.append({**s, **b, "brokerId": int(bid) if bid else None})
            blocks.append(Block(name, rows, cols))
        elif name == "syncStateSetInfoTable":
            cols = ["brokerName", "clusterName", "masterBrokerId", "masterEpoch", "syncStateSet", "syncStateSetEpoch"]
            blocks.append(Block(name, list(d.values()), cols))
        elif name == "brokerLiveTable":
            blocks.append(Block(name, d["brokers"], list(ROW_FIELDS)))
            if d["pendingReelections"]:
                rows = [{"brokerName": k, "retriesLeft": v} for k, v in d["pendingReelections"].items()]
                blocks.append(Block("pendingReelections", rows, ["brokerName", "retriesLeft"]))
        elif name == "kvConfig":
            rows = [{"namespace": ns, "key": k, "value": v} for ns, keys in d.items() for k, v in keys.items()]
            blocks.append(Block(name, rows, ["namespace", "key", "value"]))
        elif name == "controllerConfig":
            rows = [{"key": k, "value": v, "explicit": k in d["explicit"]} for k, v in d["effective"].items()]
            blocks.append(Block(name, rows, ["key", "value", "explicit"]))
        else:  # a section this version cannot lay out as rows: one row per top-level key
            items = d.items() if isinstance(d, dict) else enumerate(d)
            blocks.append(Block(name, [{"key": k, "value": v} for k, v in items], ["key", "value"]))
    return blocks
