"""The history file (`history.jsonl`): one JSON object per line, in the order recorded (docs/jepsen.md).

`Record` is one line; `pair_ops` turns the client records into `Op`s (an invoke joined with its
completion) and keeps nemesis records apart. Every malformed line raises `HistoryError` naming the line
and the field, so that `python -m jepsen check` can say exactly what is wrong (exit code 3).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
TYPES = (INVOKE, OK, FAIL, INFO)
NEMESIS = "nemesis"
FIELDS = ("process", "type", "f", "key", "value", "time")  # the fixed fields, in the order we write them

Key = str | int | None
Process = int | str


class HistoryError(ValueError):
    """A malformed history: `line` is 1-based (0 when the whole file is at fault), `field` may be None."""

    def __init__(self, line: int, field: str | None, message: str) -> None:
        self.line = line
        self.field = field
        self.message = message
        where = f"line {line}" if line else "history"
        super().__init__(f"{where}: field {field!r}: {message}" if field else f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class Record:
    """One line of the history. `extra` keeps fields we do not interpret (such as `error` or `node`)."""

    process: Process
    type: str
    f: str
    time: int
    key: Key = None
    value: Any = None
    line: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"process": self.process, "type": self.type, "f": self.f}
        if self.key is not None:
            out["key"] = self.key
        out["value"] = self.value
        out["time"] = self.time
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True)
class Op:
    """A client operation: an invoke joined with its completion.

    `type` is the completion's type; an invoke the history never completes counts as `info` (its outcome is
    unknown) with `complete_time` None. `value` is what the invoke carried, `result` what the completion
    carried (the value read, for an ok read), `extra` the completion's other fields (such as `node`,
    `error`, or `current` of a cas that did not apply).
    """

    index: int
    process: int
    f: str
    key: Key
    value: Any
    type: str
    result: Any
    invoke_time: int
    complete_time: int | None
    invoke_line: int
    complete_line: int | None
    extra: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def end(self) -> float:
        """When the op surely took effect by: its completion, or +infinity when its outcome is unknown."""
        if self.type == INFO or self.complete_time is None:
            return math.inf
        return self.complete_time

    @property
    def lines(self) -> str:
        return f"{self.invoke_line}" if self.complete_line is None else f"{self.invoke_line}-{self.complete_line}"

    def to_json(self) -> dict[str, Any]:
        """`value` is the invoke's value, `result` the completion's; `lines` the two line numbers; `extra`
        (only when there is any) the completion's other fields."""
        out: dict[str, Any] = {
            "index": self.index,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "key": self.key,
            "value": self.value,
            "result": self.result,
            "invoke_time": self.invoke_time,
            "complete_time": self.complete_time,
            "lines": [self.invoke_line, self.complete_line],
        }
        if self.extra:
            out["extra"] = self.extra
        return out

    @classmethod
    def from_json(cls, o: dict[str, Any]) -> Op:
        return cls(
            index=o["index"],
            process=o["process"],
            f=o["f"],
            key=o["key"],
            value=o["value"],
            type=o["type"],
            result=o["result"],
            invoke_time=o["invoke_time"],
            complete_time=o["complete_time"],
            invoke_line=o["lines"][0],
            complete_line=o["lines"][1],
            extra=o.get("extra") or {},
        )


@dataclass(frozen=True, slots=True)
class History:
    records: list[Record]
    ops: list[Op]
    nemesis: list[Record]
    path: str | None = None


# ---------------------------------------------------------------------------------------------------------------
# Parsing and validation of single records


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_record(obj: Any, line: int) -> Record:
    """Validate one decoded JSON line and return it as a Record."""
    if not isinstance(obj, dict):
        raise HistoryError(line, None, f"expected a JSON object, got {type(obj).__name__}")
    for name in ("process", "type", "f", "time"):
        if name not in obj:
            raise HistoryError(line, name, "missing")
    process = obj["process"]
    if not ((_is_int(process) and process >= 0) or process == NEMESIS):
        raise HistoryError(line, "process", f"expected a non-negative integer or {NEMESIS!r}, got {process!r}")
    rtype = obj["type"]
    if rtype not in TYPES:
        raise HistoryError(line, "type", f"expected one of {', '.join(TYPES)}, got {rtype!r}")
    f = obj["f"]
    if not isinstance(f, str) or not f:
        raise HistoryError(line, "f", f"expected a non-empty string, got {f!r}")
    t = obj["time"]
    if not _is_int(t) or t < 0:
        raise HistoryError(line, "time", f"expected non-negative integer nanoseconds, got {t!r}")
    key = obj.get("key")
    if key is not None and not (isinstance(key, str) or _is_int(key)):
        raise HistoryError(line, "key", f"expected a string, an integer or null, got {key!r}")
    extra = {k: v for k, v in obj.items() if k not in FIELDS}
    return Record(process, rtype, f, t, key, obj.get("value"), line, extra)


def parse_lines(lines: Iterable[str]) -> Iterator[Record]:
    """Records from JSON lines; blank lines are skipped, line numbers count them."""
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise HistoryError(n, None, f"not valid JSON: {e.msg} at column {e.colno}") from None
        yield parse_record(obj, n)


# ---------------------------------------------------------------------------------------------------------------
# Pairing invokes with completions


def pair_ops(records: Iterable[Record]) -> tuple[list[Op], list[Record]]:
    """Join every client invoke with its completion; return (ops ordered by invoke, nemesis records).

    Rules (Jepsen's): a process is sequential (one op in flight); a completion answers the pending invoke
    of its process with the same f and key; after an `info` the process is never used again (the op
    stays in flight forever, so the client takes a new process number). An invoke left without completion
    at the end of the history counts as `info`.
    """
    pending: dict[int, Record] = {}
    retired: dict[int, int] = {}  # process -> line of the info that retired it
    last_time: dict[int, int] = {}
    pairs: list[tuple[Record, Record | None]] = []
    nemesis: list[Record] = []
    for r in records:
        if r.process == NEMESIS:
            nemesis.append(r)
            continue
        p = r.process
        assert isinstance(p, int)
        if r.time < last_time.get(p, 0):
            raise HistoryError(
                r.line, "time", f"{r.time} is earlier than process {p}'s previous record ({last_time[p]})"
            )
        last_time[p] = r.time
        if r.type == INVOKE:
            if p in retired:
                raise HistoryError(
                    r.line,
                    "process",
                    f"process {p} invoked again after its info completion on line {retired[p]}; an op whose "
                    "outcome is unknown stays in flight, so the client must take a new process number",
                )
            if p in pending:
                raise HistoryError(
                    r.line,
                    "process",
                    f"process {p} already has an op in flight (invoked on line {pending[p].line}); "
                    "every process must be sequential",
                )
            pending[p] = r
            continue
        inv = pending.pop(p, None)
        if inv is None:
            raise HistoryError(r.line, "type", f"{r.type} completion of process {p} without a pending invoke")
        if inv.f != r.f:
            raise HistoryError(r.line, "f", f"{r.f!r} completes an invoke of {inv.f!r} (line {inv.line})")
        if inv.key != r.key:
            raise HistoryError(r.line, "key", f"{r.key!r} completes an invoke on key {inv.key!r} (line {inv.line})")
        if r.type == INFO:
            retired[p] = r.line
        pairs.append((inv, r))
    pairs.extend((inv, None) for inv in pending.values())
    pairs.sort(key=lambda pair: pair[0].line)
    ops = []
    for i, (inv, done) in enumerate(pairs):
        assert isinstance(inv.process, int)
        ops.append(
            Op(
                index=i,
                process=inv.process,
                f=inv.f,
                key=inv.key,
                value=inv.value,
                type=INFO if done is None else done.type,
                result=None if done is None else done.value,
                invoke_time=inv.time,
                complete_time=None if done is None else done.time,
                invoke_line=inv.line,
                complete_line=None if done is None else done.line,
                extra={} if done is None else done.extra,
            )
        )
    return ops, nemesis


def history_from_records(records: Iterable[Record], path: str | None = None) -> History:
    recs = list(records)
    ops, nemesis = pair_ops(recs)
    return History(recs, ops, nemesis, path)


def read_history(path: str | os.PathLike[str]) -> History:
    """Read, validate and pair a history file. Raises HistoryError (and OSError when unreadable)."""
    with open(path, encoding="utf-8") as fh:
        records = list(parse_lines(fh))
    return history_from_records(records, str(path))


# ---------------------------------------------------------------------------------------------------------------
# Writing


def dump_record(record: Record | dict[str, Any]) -> str:
    obj = record.to_json() if isinstance(record, Record) else record
    return json.dumps(obj, separators=(", ", ": "), ensure_ascii=False)


class HistoryWriter:
    """Appends records to a history file, one line each, flushed after every record (a crash of the
    harness keeps everything recorded so far)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fh: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, record: Record | dict[str, Any]) -> None:
        if isinstance(record, dict):
            parse_record(record, 0)  # refuse to write what the checker would refuse to read
        self._fh.write(dump_record(record) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_history(path: str | os.PathLike[str], records: Iterable[Record | dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(dump_record(r) + "\n")
