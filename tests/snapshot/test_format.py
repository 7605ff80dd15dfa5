"""The sectioned data file and the meta file: round trips, and every kind of damage raises
SnapshotFormatError naming the file, the section and the byte offset (never a wrong success, never
another exception type)."""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import struct
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import lz4.frame
import msgpack
import pytest
from google_crc32c import value as crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raft.leaf.snapmeta import ConfState
from snapshot import (
    CODEC_LZ4,
    CODEC_RAW,
    FORMAT_VERSION,
    FileMeta,
    SnapshotError,
    SnapshotFormatError,
    SnapshotMeta,
    SnapshotReader,
    SnapshotWriter,
    decode_file,
    encode_file,
    load_managers,
    save_managers,
)
from snapshot.format import (
    CHUNK,
    ENTRY_SIZE,
    HEADER_SIZE,
    MAGIC,
    META_HEAD_SIZE,
    decode_meta,
    encode_meta,
    table_end,
)

NAMES = {1: "replicas", 2: "sync_state", 3: "liveness", 9: "empty"}


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """tmpfs when available: the loops below write and fsync hundreds of files; the format is under test."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    d = Path(tempfile.mkdtemp(prefix="snapshot-format-", dir=base))
    yield d
    shutil.rmtree(d, ignore_errors=True)


_names = itertools.count()


def fresh(scratch: Path) -> Path:
    return scratch / f"f{next(_names)}"


def write_file(path: Path, sections: list[tuple[int, bytes, int]]) -> Path:
    w = SnapshotWriter(path)
    for t, body, codec in sections:
        w.add_section(t, body, codec=codec)
    w.finish()
    return path


def read_all(path: Path, known_types: dict[int, str] | None = None) -> dict[int, bytes]:
    with SnapshotReader(path, known_types=known_types) as r:
        return {t: r.section(t) for t in r.section_types()}


def small_file() -> tuple[bytes, list[tuple[int, bytes, int]]]:
    """Four sections, lz4 and raw, two of them empty: small enough to damage at every byte."""
    sections = [
        (1, msgpack.packb({"brokerName": "b-0", "replicas": [1, 2, 3]} | {f"k{i}": i for i in range(8)}), CODEC_LZ4),
        (2, msgpack.packb([["broker-a", 7, 1], ["broker-b", 3, 2]]), CODEC_RAW),
        (9, b"", CODEC_LZ4),
        (3, b"", CODEC_RAW),
    ]
    d = Path(tempfile.mkdtemp())
    try:
        return write_file(d / "data", sections).read_bytes(), sections
    finally:
        shutil.rmtree(d)


def section_at(data: bytes, pos: int) -> int | None:
    """Which section's stored bytes contain file offset `pos` (None: header or table)."""
    count = struct.unpack_from("<I", data, 12)[0]
    for i in range(count):
        t, _, _, _, stored, offset, _ = struct.unpack_from("<HBBQQQI", data, HEADER_SIZE + i * ENTRY_SIZE)
        if offset <= pos < offset + stored:
            return t
    return None


# --- round trips ----------------------------------------------------------------------------------------

sections_strategy = st.dictionaries(
    st.integers(0, 0xFFFF),
    st.tuples(
        st.one_of(
            st.binary(max_size=300),
            st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=8), st.integers(0, 3000)),  # compressible
        ),
        st.sampled_from([CODEC_RAW, CODEC_LZ4]),
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sections=sections_strategy)
def test_round_trip(scratch: Path, sections: dict[int, tuple[bytes, int]]) -> None:
    items = [(t, body, codec) for t, (body, codec) in sections.items()]
    path = write_file(fresh(scratch), items)
    data = path.read_bytes()
    expected = {t: body for t, body, _ in items}
    with SnapshotReader(path) as r:
        assert r.section_types() == [t for t, _, _ in items]  # file order = add order
        assert [(e.type, e.codec, e.raw_length) for e in r.entries] == [(t, c, len(b)) for t, b, c in items]
        assert {t: r.section(t) for t in r.section_types()} == expected
        r.verify()
    assert decode_file(data) == expected
    assert list(decode_file(data)) == [t for t, _, _ in items]
    if all(c == CODEC_LZ4 for _, _, c in items):
        assert encode_file([(t, b) for t, b, _ in items]) == data  # deterministic, one encoder
    path.unlink()


@pytest.mark.parametrize("codec", [CODEC_RAW, CODEC_LZ4])
def test_body_bigger_than_a_chunk(scratch: Path, codec: int) -> None:
    body = msgpack.packb([{"broker": f"b-{i}", "epoch": i, "addr": f"10.0.0.{i % 250}:10911"} for i in range(120_000)])
    assert len(body) > CHUNK
    path = write_file(fresh(scratch), [(5, body, codec), (6, b"tail", codec)])
    with SnapshotReader(path) as r:
        assert r.section(5) == body and r.section(6) == b"tail"
        if codec == CODEC_LZ4:
            assert r.entry(5).stored_length < len(body) // 3
    path.unlink()


def test_layout_constants() -> None:
    assert (HEADER_SIZE, ENTRY_SIZE, table_end(0), table_end(3)) == (36, 32, 40, 136)
    empty = encode_file([])
    assert len(empty) == 40 and empty[:8] == MAGIC == b"RMQSNAP\x00"
    assert struct.unpack_from("<HHI", empty, 8) == (FORMAT_VERSION, 0, 0)
    assert decode_file(empty) == {}


# --- damage: every byte, every cut ----------------------------------------------------------------------


def expect_format_error(data: bytes, path: str = "snap/data") -> SnapshotFormatError:
    with pytest.raises(SnapshotFormatError) as info:
        decode_file(data, path, NAMES)
    e = info.value
    assert str(e).startswith(f"{path}: ") and f"byte offset {e.offset}" in str(e)
    assert 0 <= e.offset <= len(data)
    return e


def test_every_flipped_byte_is_detected_in_memory() -> None:
    data, _ = small_file()
    body_start = table_end(4)
    for pos in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[pos] ^= mask
            e = expect_format_error(bytes(bad))
            if pos < HEADER_SIZE:
                assert e.offset < HEADER_SIZE and e.section is None, (pos, e)
            elif pos < body_start:
                # the table CRC fails before any field is believed
                assert e.offset == body_start - 4 and "section table CRC" in e.reason, (pos, e)
            else:
                t = section_at(data, pos)
                assert t is not None
                assert e.section == t and e.section_name == NAMES[t], (pos, e)
                assert f"section {t} ({NAMES[t]})" in str(e)


def test_every_flipped_byte_is_detected_through_the_file_reader(scratch: Path) -> None:
    data, _ = small_file()
    path = fresh(scratch)
    for pos in range(len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0x10
        path.write_bytes(bad)
        with pytest.raises(SnapshotFormatError) as info:
            read_all(path, NAMES)  # open checks header + table; section() checks each body
        assert info.value.path == str(path) and str(path) in str(info.value)
        if pos >= table_end(4):
            assert info.value.section == section_at(data, pos)


def test_every_truncation_is_detected() -> None:
    data, _ = small_file()
    for n in range(len(data)):
        e = expect_format_error(data[:n])
        assert e.offset == n and "truncated" in e.reason, (n, e)
        if n >= table_end(4):
            assert e.section == section_at(data, n), (n, e)


def test_every_truncation_is_detected_through_the_file_reader(scratch: Path) -> None:
    data, _ = small_file()
    path = fresh(scratch)
    for n in range(len(data)):
        path.write_bytes(data[:n])
        with pytest.raises(SnapshotFormatError) as info:
            SnapshotReader(path, known_types=NAMES)  # the layout check alone catches every cut
        assert info.value.offset == n and "truncated" in info.value.reason


@pytest.mark.parametrize("extra", [b"\x00", b"garbage", bytes(4096)])
def test_trailing_garbage(extra: bytes) -> None:
    data, _ = small_file()
    e = expect_format_error(data + extra)
    assert e.offset == len(data) and "trailing garbage" in e.reason and e.section is None


@settings(max_examples=300, deadline=None)
@given(
    sections=sections_strategy,
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_random_damage_never_passes(
    sections: dict[int, tuple[bytes, int]], edits: list[tuple[int, int]], cut: int | None
) -> None:
    data = bytearray(encode_file([(t, b) for t, (b, _) in sections.items()]))
    for pos, mask in edits:
        data[pos % len(data)] ^= mask
    if cut is not None:
        del data[cut % len(data) :]
    if bytes(data) == encode_file([(t, b) for t, (b, _) in sections.items()]):
        return  # the edits cancelled out
    with pytest.raises(SnapshotFormatError):
        decode_file(bytes(data))


# --- damage with valid CRCs: the checks behind the CRCs ---------------------------------------------------


def craft(
    entries: Sequence[tuple[int, int, int, int, int, int | None]],
    bodies: bytes,
    *,
    version: int = FORMAT_VERSION,
    flags: int = 0,
    reserved: bytes = bytes(16),
    table_reserved: int = 0,
) -> bytes:
    """A file with correct header and table CRCs: entries are (type, codec, raw, stored, offset, crc or None
    for the CRC of the stored bytes taken from `bodies`)."""
    head = struct.pack("<8sHHI16s", MAGIC, version, flags, len(entries), reserved)
    table = b""
    for t, codec, raw, stored, offset, crc in entries:
        if crc is None:
            rel = offset - table_end(len(entries))
            crc = crc32c(bodies[rel : rel + stored])
        table += struct.pack("<HBBQQQI", t, codec, table_reserved, raw, stored, offset, crc)
    return head + struct.pack("<I", crc32c(head)) + table + struct.pack("<I", crc32c(table)) + bodies


def test_crafted_valid_file_decodes() -> None:
    z = lz4.frame.compress(b"hello" * 10)
    data = craft([(1, CODEC_RAW, 3, 3, 104, None), (2, CODEC_LZ4, 50, len(z), 107, None)], b"abc" + z)
    assert decode_file(data) == {1: b"abc", 2: b"hello" * 10}


@pytest.mark.parametrize(
    ("kwargs", "offset", "reason"),
    [
        ({"version": 2}, 8, "unknown format version 2"),
        ({"flags": 1}, 10, "unknown header flags"),
        ({"reserved": bytes(5) + b"\x01" + bytes(10)}, 21, "reserved header bytes are not zero"),
        ({"table_reserved": 7}, 36 + 3, "reserved table byte is not zero"),
    ],
)
def test_header_and_table_fields_behind_the_crc(kwargs: dict, offset: int, reason: str) -> None:
    data = craft([(1, CODEC_RAW, 3, 3, 72, None)], b"abc", **kwargs)
    e = expect_format_error(data)
    assert e.offset == offset and reason in e.reason


def test_bad_magic() -> None:
    data, _ = small_file()
    e = expect_format_error(b"RMQSNAQ\x00" + data[8:])
    assert e.offset == 0 and "bad magic" in e.reason
    e = expect_format_error(b"PK\x03\x04")  # shorter than a header and not a prefix of the magic
    assert e.offset == 0 and "bad magic" in e.reason


def test_table_checks_behind_the_crc() -> None:
    z = lz4.frame.compress(b"x" * 100)
    cases = [
        # duplicate type
        ([(1, CODEC_RAW, 1, 1, 104, None), (1, CODEC_RAW, 1, 1, 105, None)], b"ab", 68, 1, "duplicate section type 1"),
        # unknown codec
        ([(1, 2, 1, 1, 40 + 32, None)], b"a", 36 + 2, 1, "unknown codec 2"),
        # raw section whose lengths disagree
        ([(2, CODEC_RAW, 5, 1, 72, None)], b"a", 36 + 4, 2, "length mismatch"),
        # gap between sections
        ([(1, CODEC_RAW, 1, 1, 73, None)], b"ab", 36 + 20, 1, "section offset 73, expected 72"),
        # unknown type (the registry NAMES has no 77)
        ([(77, CODEC_RAW, 1, 1, 72, None)], b"a", 36, 77, "unknown section type 77"),
        # lz4 body: table says 99 raw bytes, the frame holds 100
        ([(3, CODEC_LZ4, 99, len(z), 72, None)], z, 72, 3, "length mismatch: decompressed to more than 99"),
        (
            [(3, CODEC_LZ4, 101, len(z), 72, None)],
            z,
            72,
            3,
            "length mismatch: decompressed to 100 bytes, the table's raw length is 101",
        ),
        # valid CRC over bytes that are not an lz4 frame
        ([(3, CODEC_LZ4, 4, 16, 72, None)], bytes(16), 72, 3, "lz4 frame cannot be decoded"),
        ([(3, CODEC_LZ4, 4, 4, 72, None)], b"\x04\x22\x4d\x18", 72, 3, "not a complete lz4 frame"),
        # an lz4 frame followed by junk inside the section
        ([(3, CODEC_LZ4, 100, len(z) + 2, 72, None)], z + b"!!", 72, 3, "2 bytes after the end of the lz4 frame"),
        # an lz4 frame cut short (CRC recomputed over the cut bytes)
        ([(3, CODEC_LZ4, 100, len(z) - 4, 72, None)], z[:-4], 72, 3, "not a complete lz4 frame"),
    ]
    for entries, bodies, offset, section, reason in cases:
        e = expect_format_error(craft(entries, bodies))
        assert (e.offset, e.section) == (offset, section) and reason in e.reason, (reason, e)


def test_unknown_type_is_only_an_error_with_a_registry() -> None:
    data = encode_file([(77, b"x")])
    assert decode_file(data) == {77: b"x"}
    e = expect_format_error(data)
    assert e.section == 77 and e.section_name is None and "unknown section type 77" in e.reason


def test_error_message_and_pickling() -> None:
    e = SnapshotFormatError("/x/data", 123, "bad section CRC", section=1, section_name="replicas")
    assert str(e) == "/x/data: section 1 (replicas) at byte offset 123: bad section CRC"
    assert str(SnapshotFormatError("/x/data", 5, "why")) == "/x/data: at byte offset 5: why"
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.path, e2.offset, e2.reason, e2.section, e2.section_name, str(e2)) == (
        e.path,
        e.offset,
        e.reason,
        e.section,
        e.section_name,
        str(e),
    )
    assert isinstance(e, SnapshotError)


# --- the writer --------------------------------------------------------------------------------------------


def test_finish_can_run_on_another_thread(scratch: Path) -> None:
    path = fresh(scratch)
    w = SnapshotWriter(path)
    body = bytearray(b"point-in-time")
    w.add_section(1, body)  # a mutable body is copied: later changes do not leak into the snapshot
    w.add_section(2, b"immutable")
    body[:] = b"changed"
    result: list = []
    t = threading.Thread(target=lambda: result.append(w.finish()))
    t.start()
    t.join()
    assert result[0].size == path.stat().st_size and [e.type for e in result[0].sections] == [1, 2]
    assert read_all(path) == {1: b"point-in-time", 2: b"immutable"}
    with pytest.raises(SnapshotError):
        w.add_section(3, b"late")
    with pytest.raises(SnapshotError):
        w.finish()


@pytest.mark.parametrize("codec", [CODEC_RAW, CODEC_LZ4])
def test_parts_joined_on_the_writer_thread_write_the_same_file_as_the_whole_body(scratch: Path, codec: int) -> None:
    rows = [bytes([i % 251]) * (1 + i % 70) for i in range(5_000)]  # ~180 KiB: several lz4 blocks
    whole, parted = SnapshotWriter(fresh(scratch), codec=codec), SnapshotWriter(fresh(scratch), codec=codec)
    whole.add_section(1, b"".join(rows))
    whole.add_section(2, b"tail")
    parted.add_section_parts(1, rows)
    parted.add_section(2, b"tail")
    t = threading.Thread(target=parted.finish)
    t.start()
    t.join()
    whole.finish()
    assert parted.path.read_bytes() == whole.path.read_bytes()
    with pytest.raises(TypeError):
        parted.add_section_parts(3, b"not a list")  # type: ignore[arg-type]


def test_writer_rejects_bad_sections(scratch: Path) -> None:
    w = SnapshotWriter(fresh(scratch), known_types=NAMES)
    w.add_section(1, b"a")
    for bad in (1, -1, 0x10000, True, "1"):
        with pytest.raises(ValueError):
            w.add_section(bad, b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        w.add_section(50, b"x")  # not in the registry
    with pytest.raises(TypeError):
        w.add_section(2, "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        w.add_section(2, b"x", codec=9)
    assert w.section_types() == [1]


def test_finish_never_overwrites_and_cleans_up_on_failure(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = fresh(scratch)
    path.write_bytes(b"someone else's file")
    w = SnapshotWriter(path)
    w.add_section(1, b"x")
    with pytest.raises(FileExistsError):
        w.finish()
    assert path.read_bytes() == b"someone else's file"

    path2 = fresh(scratch)
    w = SnapshotWriter(path2)
    w.add_section(1, b"x" * 1000)

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("snapshot.rw.os.fsync", failing_fsync)
    with pytest.raises(OSError):
        w.finish()
    assert not path2.exists()


# --- managers (RIP-59) ----------------------------------------------------------------------------------


class TableManager:
    def __init__(self, stype: int, rows: dict[str, int] | None = None) -> None:
        self.stype = stype
        self.rows = dict(rows or {})

    def section_type(self) -> int:
        return self.stype

    def encode_snapshot(self) -> bytes:
        return msgpack.packb(self.rows)

    def load_snapshot(self, body: bytes) -> None:
        rows = msgpack.unpackb(body)
        if not isinstance(rows, dict):
            raise TypeError(f"expected a map, got {type(rows).__name__}")
        self.rows = rows


def test_managers_round_trip_and_decode_errors(scratch: Path) -> None:
    path = fresh(scratch)
    w = SnapshotWriter(path, known_types=NAMES)
    save_managers(w, [TableManager(1, {"broker-a": 1}), TableManager(2, {"broker-b": 2})])
    w.add_section(3, b"\xc1")  # 0xc1 is never valid msgpack
    w.finish()
    fresh_managers = [TableManager(1), TableManager(2)]
    with SnapshotReader(path, known_types=NAMES) as r:
        load_managers(r, fresh_managers)
        assert [m.rows for m in fresh_managers] == [{"broker-a": 1}, {"broker-b": 2}]
        with pytest.raises(SnapshotFormatError) as info:
            load_managers(r, [TableManager(3)])
        assert info.value.section == 3 and info.value.section_name == "liveness"
        assert info.value.offset == r.entry(3).offset and "TableManager.load_snapshot" in info.value.reason
        with pytest.raises(KeyError):
            load_managers(r, [TableManager(9)])
        load_managers(r, [TableManager(9)], allow_missing=True)
        with pytest.raises(ValueError):
            load_managers(r, [TableManager(1), TableManager(1)])


# --- the meta file ------------------------------------------------------------------------------------------

META = SnapshotMeta(
    index=12345,
    term=7,
    conf=ConfState(voters=("n1", "n2", "n3"), learners=("n4",)),
    files=(FileMeta("data", 1000, 0xDEADBEEF), FileMeta("extra", 0, 0)),
    created_at=1_700_000_000.25,
    user_meta={"controller": "jraft", "threshold": 10000, "blob": b"\x00\x01"},
)


@settings(max_examples=100, deadline=None)
@given(
    index=st.integers(0, 2**64 - 1),
    term=st.integers(0, 2**64 - 1),
    voters=st.lists(st.text(max_size=20), max_size=5),
    learners=st.lists(st.text(max_size=20), max_size=3),
    sizes=st.lists(st.tuples(st.integers(0, 2**63), st.integers(0, 2**32 - 1)), max_size=4),
    created_at=st.floats(allow_nan=False, allow_infinity=False),
    user_meta=st.dictionaries(
        st.text(max_size=10), st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(), st.binary())
    ),
)
def test_meta_round_trip(index, term, voters, learners, sizes, created_at, user_meta) -> None:
    files = tuple(FileMeta(f"file-{i}", s, c) for i, (s, c) in enumerate(sizes))
    learners = [x for x in learners if x not in voters]  # a configuration: no node both voter and learner
    meta = SnapshotMeta(index, term, ConfState(tuple(voters), tuple(learners)), files, created_at, user_meta)
    assert decode_meta(encode_meta(meta), "m") == meta


def test_meta_every_flipped_byte_and_every_cut_is_detected() -> None:
    raw = encode_meta(META)
    assert raw[:8] == b"RMQSMETA"
    for pos in range(len(raw)):
        for mask in (0x01, 0xFF):
            bad = bytearray(raw)
            bad[pos] ^= mask
            with pytest.raises(SnapshotFormatError) as info:
                decode_meta(bytes(bad), "snap/__raft_snapshot_meta")
            assert str(info.value).startswith("snap/__raft_snapshot_meta: ")
    for n in range(len(raw)):
        with pytest.raises(SnapshotFormatError) as info:
            decode_meta(raw[:n], "m")
        assert info.value.offset in (0, n, 12)  # bad magic / truncated / length field disagrees with the size
    with pytest.raises(SnapshotFormatError, match="trailing garbage"):
        decode_meta(raw + b"x", "m")


def _meta_with_body(body: bytes) -> bytes:
    head = struct.pack("<8sHHI", b"RMQSMETA", 1, 0, len(body)) + body
    return head + struct.pack("<I", crc32c(head))


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ([1, 2], "expected a map"),
        ({"last_included_index": 1}, "missing field"),
        (
            {**msgpack.unpackb(encode_meta(META)[META_HEAD_SIZE:-4]), "voters": "n1"},
            "field 'voters' has type str",
        ),
        (
            {**msgpack.unpackb(encode_meta(META)[META_HEAD_SIZE:-4]), "last_included_term": -1},
            "negative",
        ),
        (
            {
                **msgpack.unpackb(encode_meta(META)[META_HEAD_SIZE:-4]),
                "files": [{"name": "../../etc/passwd", "size": 1, "crc32c": 1}],
            },
            "not allowed",
        ),
        (
            {
                **msgpack.unpackb(encode_meta(META)[META_HEAD_SIZE:-4]),
                "files": [{"name": "data", "size": 1, "crc32c": 1}] * 2,
            },
            "duplicate file name",
        ),
    ],
)
def test_meta_schema_errors(doc: object, reason: str) -> None:
    with pytest.raises(SnapshotFormatError) as info:
        decode_meta(_meta_with_body(msgpack.packb(doc)), "m")
    assert info.value.offset == META_HEAD_SIZE and reason in info.value.reason


def test_meta_member_addresses_round_trip_and_are_optional() -> None:
    """Issue 12, bug 5: the configuration's member addresses ride in the optional `addresses` key; a meta
    without them is byte for byte the layout before the key existed, and such a meta still loads. A member's
    remoting address (issue 17) is a fourth string, written only when known."""
    addresses = (("n1", "10.0.0.1:9880", "10.0.0.1:8770", "10.0.0.1:9770"), ("n4", "10.0.0.4:9880", "", ""))
    with_addrs = replace(META, conf=replace(META.conf, addresses=addresses))
    raw = encode_meta(with_addrs)
    assert decode_meta(raw, "m") == with_addrs
    assert msgpack.unpackb(raw[META_HEAD_SIZE:-4])["addresses"] == [
        ["n1", "10.0.0.1:9880", "10.0.0.1:8770", "10.0.0.1:9770"],
        ["n4", "10.0.0.4:9880", ""],
    ]
    old = msgpack.unpackb(encode_meta(META)[META_HEAD_SIZE:-4]) | {"addresses": [["n1", "a:1", "a:2"]]}
    assert decode_meta(_meta_with_body(msgpack.packb(old)), "m").addresses == (("n1", "a:1", "a:2", ""),)
    assert "addresses" not in msgpack.unpackb(encode_meta(META)[META_HEAD_SIZE:-4])
    assert decode_meta(encode_meta(META), "m").addresses == ()
    for bad in ("n1", [["n1", "a:1"]], [["n1", "a:1", 3]], [["n1", "a:1", "", 4]], [["n1", "a", "b", "c", "d"]]):
        doc = msgpack.unpackb(encode_meta(META)[META_HEAD_SIZE:-4]) | {"addresses": bad}
        with pytest.raises(SnapshotFormatError, match="field 'addresses'"):
            decode_meta(_meta_with_body(msgpack.packb(doc)), "m")


def test_meta_unknown_fields_are_ignored_and_bad_msgpack_is_an_error() -> None:
    doc = msgpack.unpackb(encode_meta(META)[META_HEAD_SIZE:-4]) | {"added_in_a_later_release": 1}
    assert decode_meta(_meta_with_body(msgpack.packb(doc)), "m") == META
    with pytest.raises(SnapshotFormatError, match="not valid msgpack"):
        decode_meta(_meta_with_body(b"\xc1"), "m")
    with pytest.raises(SnapshotFormatError, match="unknown meta format version 2"):
        decode_meta(b"RMQSMETA\x02\x00" + encode_meta(META)[10:], "m")
