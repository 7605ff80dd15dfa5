"""history.jsonl: parsing, validation errors naming line and field, pairing invokes with completions,
writing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jepsen.history import (
    HistoryError,
    HistoryWriter,
    Op,
    Record,
    history_from_records,
    parse_lines,
    parse_record,
    read_history,
    write_history,
)

DOC_EXAMPLE = """\
{"process": 3, "type": "invoke", "f": "write", "key": "k1", "value": 7, "time": 1200}
{"process": 3, "type": "ok",     "f": "write", "key": "k1", "value": 7, "time": 1850}
{"process": 1, "type": "invoke", "f": "read",  "key": "k1", "value": null, "time": 1900}
{"process": 1, "type": "ok",     "f": "read",  "key": "k1", "value": 7, "time": 2300}
{"process": 2, "type": "invoke", "f": "cas",   "key": "k1", "value": [7, 8], "time": 2400}
{"process": 2, "type": "info",   "f": "cas",   "key": "k1", "value": [7, 8], "time": 9400}
{"process": "nemesis", "type": "info", "f": "start", "value": "partition-random-halves", "time": 3000}
"""


def error(text: str) -> HistoryError:
    with pytest.raises(HistoryError) as e:
        history_from_records(parse_lines(text.splitlines()))
    return e.value


def line(**fields: Any) -> str:
    rec = {"process": 1, "type": "invoke", "f": "read", "key": "k", "value": None, "time": 0} | fields
    return json.dumps({k: v for k, v in rec.items() if v is not ...})


def test_the_example_of_the_doc(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(DOC_EXAMPLE)
    h = read_history(path)
    assert h.path == str(path)
    assert len(h.records) == 7
    assert [(o.process, o.f, o.type, o.value, o.result) for o in h.ops] == [
        (3, "write", "ok", 7, 7),
        (1, "read", "ok", None, 7),
        (2, "cas", "info", [7, 8], [7, 8]),
    ]
    assert [r.value for r in h.nemesis] == ["partition-random-halves"]
    write, _, info = h.ops
    assert (write.invoke_time, write.complete_time, write.end, write.lines) == (1200, 1850, 1850, "1-2")
    assert info.end == float("inf")  # an unknown outcome may take effect at any later time


def test_an_invoke_without_completion_is_indeterminate() -> None:
    h = history_from_records(parse_lines([line(f="write", value=1, time=5)]))
    (op,) = h.ops
    assert (op.type, op.complete_time, op.complete_line, op.end) == ("info", None, None, float("inf"))


def test_blank_lines_are_skipped_but_counted() -> None:
    h = history_from_records(parse_lines(["", line(), "   ", line(type="ok", value=None, time=3)]))
    assert (h.ops[0].invoke_line, h.ops[0].complete_line) == (2, 4)


def test_extra_fields_are_kept() -> None:
    rec = parse_record({"process": 1, "type": "info", "f": "write", "time": 3, "error": "timeout"}, 9)
    assert rec.extra == {"error": "timeout"} and rec.line == 9
    assert rec.to_json()["error"] == "timeout"


@pytest.mark.parametrize(
    ("text", "lineno", "field", "words"),
    [
        ("{not json", 1, None, "not valid JSON"),
        ("[1, 2]", 1, None, "expected a JSON object"),
        (line(process=...), 1, "process", "missing"),
        (line(time=...), 1, "time", "missing"),
        (line(process=-1), 1, "process", "non-negative integer"),
        (line(process="n1"), 1, "process", "'nemesis'"),
        (line(type="done"), 1, "type", "invoke, ok, fail, info"),
        (line(f=""), 1, "f", "non-empty string"),
        (line(time=1.5), 1, "time", "integer nanoseconds"),
        (line(time=True), 1, "time", "integer nanoseconds"),
        (line(key=[1]), 1, "key", "a string, an integer or null"),
        (line() + "\n" + line(time=5), 2, "process", "already has an op in flight (invoked on line 1)"),
        (line(type="ok"), 1, "type", "without a pending invoke"),
        (line() + "\n" + line(type="ok", f="write"), 2, "f", "completes an invoke of 'read'"),
        (line() + "\n" + line(type="ok", key="other"), 2, "key", "completes an invoke on key 'k'"),
        (line(time=10) + "\n" + line(type="ok", time=9), 2, "time", "earlier than process 1's previous record"),
        (line() + "\n" + line(type="info") + "\n" + line(time=5), 3, "process", "after its info completion on line 2"),
    ],
)
def test_errors_name_line_and_field(text: str, lineno: int, field: str | None, words: str) -> None:
    e = error(text)
    assert (e.line, e.field) == (lineno, field)
    assert words in str(e)
    assert str(e).startswith(f"line {lineno}: " + (f"field {field!r}: " if field else ""))


def test_ops_are_ordered_by_invoke() -> None:
    text = [
        line(process=1, f="write", value=1, time=0),
        line(process=2, f="write", value=2, time=1),
        line(process=2, type="ok", f="write", value=2, time=2),
        line(process=1, type="fail", f="write", value=1, time=3),
    ]
    h = history_from_records(parse_lines(text))
    assert [(o.index, o.process, o.type) for o in h.ops] == [(0, 1, "fail"), (1, 2, "ok")]


def test_writer_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    recs = list(parse_lines(DOC_EXAMPLE.splitlines()))
    with HistoryWriter(path) as w:
        for r in recs[:3]:
            w.write(r)
        w.write(recs[3].to_json())  # a plain dict works too
    with HistoryWriter(path) as w:  # appends
        for r in recs[4:]:
            w.write(r)
    again = read_history(path)
    assert [r.to_json() for r in again.records] == [r.to_json() for r in recs]
    write_history(tmp_path / "copy.jsonl", recs)
    assert (tmp_path / "copy.jsonl").read_text() == path.read_text()
    # the nemesis record has no key, and none is written
    assert '"key"' not in path.read_text().splitlines()[-1]


def test_writer_refuses_malformed_dicts(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "h.jsonl") as w, pytest.raises(HistoryError, match="field 'type'"):
        w.write({"process": 1, "type": "done", "f": "read", "time": 0})


def test_op_json_round_trip() -> None:
    h = history_from_records(parse_lines(DOC_EXAMPLE.splitlines()))
    for op in h.ops:
        assert Op.from_json(json.loads(json.dumps(op.to_json()))) == op
        assert "extra" not in op.to_json()
    assert isinstance(h.records[0], Record)


def test_an_op_keeps_the_other_fields_of_its_completion() -> None:
    refused = line(type="ok", f="cas", value=False, time=5, current=7, node="n1:9770")
    h = history_from_records(parse_lines([line(f="cas", value=[6, 8]), refused]))
    (op,) = h.ops
    assert (op.value, op.result, op.extra) == ([6, 8], False, {"current": 7, "node": "n1:9770"})
    assert Op.from_json(json.loads(json.dumps(op.to_json()))) == op
