"""The brokers' epoch files against the controller's log (check `broker.epoch`, docs/audit.md; the file's
format in docs/broker-epoch-file.md).

A RocketMQ broker in controller mode keeps `<storePathRootDir>/epochFileCheckpoint` (`storePathEpochFile`):
one `epoch-startOffset` line per master epoch of its commit log. A broker made master at epoch E appends
(E, its max commit log offset) (`AutoSwitchHAService.changeToMaster`); a slave appends the (epoch, start
offset) its master sends with the data (`AutoSwitchHAClient`), so a slave's entries are copies of its
masters'. Hence, per broker set and per entry (E, S) of a broker B's file:

- the controller's log elected a master of B's set at epoch E (else B's set wrote in an epoch the controller
  never gave: an error);
- that master is B (B wrote as master at E, as it was told), or B's entry is a copy of the master's: the
  master's own file, when given, starts E at S too. A different S means B appended E itself, as master, in
  an epoch the controller gave another broker: an error. So does a master's file that lacks E while it
  holds earlier epochs and no later master of the set was another broker (nothing could have made it
  truncate E: it never wrote at E, so no slave can hold a copy). Otherwise, without the master's file or
  with one that lacks E, a slave's copy cannot be told from a claim: an `info` finding says so.

Epochs before the replay's start (a compacted log replayed from a snapshot) cannot be checked: `info`.
Which broker a file belongs to: `brokerIdentity` beside it (`clusterName#brokerName#brokerId`, written by
the broker once the controller assigned its id: `BrokerMetadata`), else a `broker.conf` in its directory or
the one above (`brokerName` and `brokerIP1:listenPort`, matched with the addresses the controller
registered).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from tools.audit.model import Finding

EPOCH_FILE = "epochFileCheckpoint"
BROKER_IDENTITY_FILE = "brokerIdentity"
BROKER_CONF_FILES = ("broker.conf", "broker.properties")
MAX_DEPTH = 4
MAX_FILE_BYTES = 1 << 20
NOT_CHECKED_CRC = 0  # CheckpointFile.NOT_CHECK_CRC_MAGIC_CODE
_ENTRY = re.compile(rb"(\d{1,10})-(\d{1,19})")
_INT = re.compile(rb"-?\d{1,10}")

Election = tuple[int, int, str | None, int]  # (masterEpoch, master brokerId, address, log index)


class EpochFileError(ValueError):
    """A malformed epoch file: `str()` is `path:line N (byte B): reason`."""

    def __init__(self, path: str, line: int, offset: int, reason: str) -> None:
        super().__init__(f"{path}: line {line} (byte {offset}): {reason}")
        self.path, self.line, self.offset, self.reason = path, line, offset, reason


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int
    line: int  # 1-based line of the file
    offset: int  # byte offset of the line


def crc32_of(body: bytes) -> int:
    """RocketMQ's `UtilAll.crc32`: java.util.zip.CRC32 (zlib's) masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def encode_epoch_file(entries: list[tuple[int, int]]) -> bytes:
    """What `CheckpointFile.write` writes for `EpochFileCache` on Linux (lineSeparator "\\n")."""
    body = b"".join(b"%d-%d\n" % e for e in entries)
    return b"%d\n%d\n" % (len(entries), crc32_of(body)) + body


def parse_epoch_file(data: bytes, path: str) -> list[EpochEntry]:
    """The entries of an epoch file, checked as RocketMQ reads it (count, CRC) and more strictly: every entry
    line must be `epoch-startOffset` (RocketMQ skips a bad line, then fails on the count) and epochs and
    start offsets must both rise (as `EpochFileCache.appendEntry` keeps them). Raises EpochFileError."""
    lines: list[tuple[int, bytes]] = []  # (byte offset, line without its terminator)
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl
        raw = data[pos:end]
        lines.append((pos, raw[:-1] if raw.endswith(b"\r") else raw))  # readLine takes \n and \r\n
        pos = end + 1
    if len(lines) < 2:
        raise EpochFileError(path, len(lines) + 1, len(data), "the file ends before its count and CRC lines")
    for k, what in ((0, "entry count"), (1, "CRC")):
        off, text = lines[k]
        if not _INT.fullmatch(text):
            raise EpochFileError(path, k + 1, off, f"the {what} line is {text[:40]!r}, not a number")
    count, crc = int(lines[0][1]), int(lines[1][1])
    entries: list[EpochEntry] = []
    body = bytearray()
    for k, (off, text) in enumerate(lines[2:], start=3):
        m = _ENTRY.fullmatch(text)
        if m is None:
            raise EpochFileError(path, k, off, f"{text[:40]!r} is not an entry `epoch-startOffset`")
        e = EpochEntry(int(m.group(1)), int(m.group(2)), k, off)
        if e.epoch > 0x7FFFFFFF or e.start_offset > 0x7FFFFFFFFFFFFFFF:
            raise EpochFileError(path, k, off, "epoch or start offset out of Java's int/long range")
        if entries and (e.epoch <= entries[-1].epoch or e.start_offset <= entries[-1].start_offset):
            prev = entries[-1]
            raise EpochFileError(
                path,
                k,
                off,
                f"entry {e.epoch}-{e.start_offset} does not rise above line {prev.line}'s "
                f"{prev.epoch}-{prev.start_offset} (epochs and start offsets both rise)",
            )
        entries.append(e)
        body += text + b"\n"
    if count != len(entries):
        raise EpochFileError(path, 1, 0, f"the count line says {count} entries, the file holds {len(entries)}")
    if crc != NOT_CHECKED_CRC and crc != crc32_of(bytes(body)):
        raise EpochFileError(
            path, 2, lines[1][0], f"CRC {crc} does not match the entries' {crc32_of(bytes(body))} (damaged or edited)"
        )
    return entries


@dataclass
class BrokerEpochs:
    """One broker's epoch file and who the broker is."""

    path: str
    broker_name: str | None = None
    broker_id: int | None = None
    address: str | None = None
    identity_path: str | None = None  # the file that said who it is (brokerIdentity or broker.conf)
    entries: list[EpochEntry] = field(default_factory=list)
    error: EpochFileError | None = None

    @property
    def label(self) -> str:
        who = f"{self.broker_name or '?'}/{self.broker_id if self.broker_id is not None else '?'}"
        return f"{who}@{self.address}" if self.address else who


class Fs(Protocol):
    def isdir(self, uri: str) -> bool: ...
    def ls(self, uri: str) -> list[tuple[str, int, bool]]: ...
    def read(self, uri: str) -> bytes: ...


def _join(uri: str, name: str) -> str:
    return uri.rstrip("/") + "/" + name


def find_epoch_files(fs: Fs, roots: list[str]) -> list[BrokerEpochs]:
    """Every `epochFileCheckpoint` within MAX_DEPTH levels of the roots (broker store dirs, their parents, or
    dirs of them), each read, parsed and attributed. A root that is not a directory or holds none raises
    ValueError (a usage error)."""
    out: list[BrokerEpochs] = []
    for root in roots:
        if not fs.isdir(root):
            raise ValueError(f"{root}: not a directory (expected broker store dirs holding {EPOCH_FILE})")
        found: list[tuple[str, list[tuple[str, int, bool]], str | None]] = []
        _walk(fs, root.rstrip("/") or "/", None, 0, found)
        if not found:
            raise ValueError(f"{root}: no {EPOCH_FILE} within {MAX_DEPTH} levels (a broker's storePathRootDir)")
        for d, entries, parent in found:
            out.append(_read_broker(fs, d, entries, parent))
    return out


def _walk(fs: Fs, uri: str, parent: str | None, depth: int, found: list[Any]) -> None:
    entries = fs.ls(uri)
    if any(n == EPOCH_FILE and not d for n, _, d in entries):
        found.append((uri, entries, parent))
    if depth < MAX_DEPTH:
        for n, _, d in entries:
            if d:
                _walk(fs, _join(uri, n), uri, depth + 1, found)


def _read_broker(fs: Fs, d: str, entries: list[tuple[str, int, bool]], parent: str | None) -> BrokerEpochs:
    path = _join(d, EPOCH_FILE)
    b = BrokerEpochs(path)
    size = next(s for n, s, isdir in entries if n == EPOCH_FILE and not isdir)
    try:
        if size > MAX_FILE_BYTES:
            raise EpochFileError(path, 1, 0, f"{size} bytes is far more than an epoch file holds")
        b.entries = parse_epoch_file(fs.read(path), path)
    except EpochFileError as e:
        b.error = e
    names = {n for n, _, isdir in entries if not isdir}
    if BROKER_IDENTITY_FILE in names:
        ident = _join(d, BROKER_IDENTITY_FILE)
        text = fs.read(ident).decode(errors="replace").strip()
        parts = text.split("#")
        if len(parts) == 3 and re.fullmatch(r"-?\d+", parts[2]):
            b.broker_name, b.broker_id, b.identity_path = parts[1], int(parts[2]), ident
    for place in (d, parent):
        if place is None or b.address is not None:
            continue
        listing = entries if place == d else fs.ls(place)
        for conf_name in BROKER_CONF_FILES:
            if any(n == conf_name and not isdir for n, _, isdir in listing):
                props = _properties(fs, _join(place, conf_name))
                if b.broker_name is None and props.get("brokerName"):
                    b.broker_name, b.identity_path = props["brokerName"], _join(place, conf_name)
                if props.get("listenPort"):
                    b.address = f"{props.get('brokerIP1') or '127.0.0.1'}:{props['listenPort']}"
                break
    return b


def _properties(fs: Fs, path: str) -> dict[str, str]:
    from api.service.properties import PropertiesError, parse_properties  # driver only

    try:
        return {p.key: p.value.strip() for p in parse_properties(fs.read(path).decode(), path)}
    except (PropertiesError, UnicodeDecodeError):
        return {}


def check_epochs(
    brokers: list[BrokerEpochs],
    elections: dict[str, list[tuple[str, Election]]],
    complete: dict[str, bool],
) -> list[Finding]:
    """`elections`: brokerName -> [(group, election)] in log order, from the replay; `complete[group]`: the
    replay started at index 1 (every election is known), else only those from its base snapshot on."""
    out: list[Finding] = []
    by_id: dict[tuple[str, int], BrokerEpochs] = {}
    for b in brokers:
        if b.error is not None:
            out.append(
                Finding(
                    "?",
                    b.label,
                    "broker.epoch_file",
                    path=b.path,
                    offset=b.error.offset,
                    entity=b.broker_name,
                    detail=f"line {b.error.line}: {b.error.reason}",
                )
            )
            continue
        if b.broker_name is not None and b.broker_id is None and b.address is not None:
            ids = {eid for _, (_, eid, addr, _) in elections.get(b.broker_name, []) if addr == b.address}
            if len(ids) == 1:
                (b.broker_id,) = ids
        if b.broker_name is None or b.broker_id is None:
            out.append(
                Finding(
                    "?",
                    b.label,
                    "broker.epoch_file",
                    path=b.path,
                    entity=b.broker_name,
                    detail=f"whose epoch file this is cannot be told: no {BROKER_IDENTITY_FILE} beside it "
                    f"(clusterName#brokerName#brokerId), and no broker.conf whose brokerName and "
                    f"brokerIP1:listenPort match one master address of the controller's log",
                )
            )
            continue
        by_id[(b.broker_name, b.broker_id)] = b
    for (name, bid), b in sorted(by_id.items()):
        known = elections.get(name, [])
        group = known[0][0] if known else "?"
        first_known = min((e[0] for _, e in known), default=None)
        for entry in b.entries:
            where = f"{b.path} line {entry.line}"

            emit = partial(_finding, out, group, b, f"{name}/{bid}", entry)
            at = [e for _, e in known if e[0] == entry.epoch]
            if not at:
                if not known and not all(complete.values()):
                    emit(
                        f"epoch {entry.epoch} of {name} ({where}): the controller's log as audited does not reach "
                        "back to every election (a group's replay starts from a snapshot, or could not run): "
                        "not checked",
                        "info",
                    )
                elif not known:
                    emit(
                        f"{b.label} wrote at epoch {entry.epoch} ({where}), but the controller's log never "
                        f"elected a master of {name}"
                    )
                elif not complete.get(group, True) and first_known is not None and entry.epoch < first_known:
                    emit(
                        f"epoch {entry.epoch} of {name} ({where}) is before the replay's start (its base "
                        f"snapshot knows epoch {first_known} on): not checked",
                        "info",
                    )
                else:
                    emit(
                        f"{b.label} wrote at epoch {entry.epoch} ({where}), an epoch the controller never gave "
                        f"a master of {name} (it elected masters at epochs {sorted({e[0] for _, e in known})})"
                    )
                continue
            if any(e[1] == bid for e in at):
                continue  # B was the master of this epoch: it wrote as it was told
            master = at[-1]
            who = f"{name}/{master[1]}" + (f"@{master[2]}" if master[2] else "")
            theirs = by_id.get((name, master[1]))
            mine = next((x for x in theirs.entries if x.epoch == entry.epoch), None) if theirs else None
            if mine is not None and mine.start_offset == entry.start_offset:
                continue  # a slave's copy of its master's entry
            if mine is not None and theirs is not None:
                emit(
                    f"{b.label} wrote as master at epoch {entry.epoch} from offset {entry.start_offset} "
                    f"({where}), but the controller gave epoch {entry.epoch} to {who} (log index {master[3]}), "
                    f"whose file starts it at {mine.start_offset} ({theirs.path} line {mine.line})",
                    election=master,
                )
            elif (
                theirs is not None
                and theirs.entries
                and theirs.entries[0].epoch < entry.epoch
                and all(e[1] == master[1] for _, e in known if e[0] > entry.epoch)
            ):
                # The master's file lacks the epoch, though it holds earlier ones (no prefix cut it away) and
                # no later master could have made it truncate it: it never wrote at that epoch, so it never
                # sent data of it, and no slave can hold a copy.
                emit(
                    f"{b.label} wrote as master at epoch {entry.epoch} from offset {entry.start_offset} "
                    f"({where}), but the controller gave epoch {entry.epoch} to {who} (log index {master[3]}), "
                    f"which never wrote at it ({theirs.path} has no entry for it, and no later master of "
                    f"{name} could have truncated one)",
                    election=master,
                )
            else:
                why = "whose epoch file is not among the inputs" if theirs is None else "whose epoch file lacks it"
                emit(
                    f"{b.label} holds epoch {entry.epoch} ({where}), which the controller gave to {who}, {why}: "
                    "a slave's copy cannot be told from a claim",
                    "info",
                    master,
                )
    return out


def _finding(
    out: list[Finding],
    group: str,
    b: BrokerEpochs,
    entity: str,
    entry: EpochEntry,
    detail: str,
    severity: str = "error",
    election: Election | None = None,
) -> None:
    given = None if election is None else {"brokerId": election[1], "address": election[2]}
    out.append(
        Finding(
            group,
            b.label,
            "broker.epoch",
            severity=severity,
            path=b.path,
            offset=entry.offset,
            log_index=None if election is None else election[3],
            entity=entity,
            field="epoch",
            snapshot_value=js_claim(entry),
            replayed_value=None if given is None else json.dumps(given, sort_keys=True),
            detail=detail,
        )
    )


def js_claim(entry: EpochEntry) -> str:
    return json.dumps({"epoch": entry.epoch, "startOffset": entry.start_offset, "line": entry.line}, sort_keys=True)
