"""The sectioned snapshot data file: header, section table, bodies. Pure bytes in, bytes out.

Byte layout, versioning rule and error messages: docs/snapshot-format.md. This module is the only
implementation of the layout; `rw.py` (files) and the offline tools build on its functions.

    header   36 B   magic "RMQSNAP\\0" | version:u16 | flags:u16 | count:u32 | reserved[16] | crc:u32
    table    32 B per section, then crc:u32 over the entries
             type:u16 | codec:u8 | reserved:u8 | raw_len:u64 | stored_len:u64 | offset:u64 | crc:u32
    bodies   back to back in table order, starting at 40 + 32 * count, ending at the end of the file

All integers little endian; every CRC is CRC32C (`google_crc32c.value`). A section body is opaque bytes
(msgpack from a `SnapshotAbleMetadataManager`), stored raw or as one lz4 frame.

The meta file of a snapshot directory (`__raft_snapshot_meta`) is here too, so that both on-disk formats
live in one pure module that offline tools (rmqctl, the Spark audit) can use on bytes:

    magic "RMQSMETA" | version:u16 | flags:u16 | body_len:u32 | msgpack map | crc:u32 over all before it
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import lz4.frame
import msgpack
from google_crc32c import value as crc32c

from raft.leaf.snapmeta import ConfState, FileMeta, SnapshotMeta
from snapshot.errors import SnapshotFormatError

FORMAT_VERSION = 1
MAGIC = b"RMQSNAP\x00"

CODEC_RAW = 0
CODEC_LZ4 = 1
CODEC_NAMES = {CODEC_RAW: "raw", CODEC_LZ4: "lz4"}

MAX_SECTION_TYPE = 0xFFFF
MAX_SECTIONS = MAX_SECTION_TYPE + 1  # types are unique u16s

# magic[8] version:u16 flags:u16 count:u32 reserved[16], then crc:u32 over those 32 bytes.
_HEADER = struct.Struct("<8sHHI16s")
_U32 = struct.Struct("<I")
HEADER_SIZE = _HEADER.size + _U32.size  # 36
_RESERVED_AT = 16
# type:u16 codec:u8 reserved:u8 raw_len:u64 stored_len:u64 offset:u64 crc:u32
_ENTRY = struct.Struct("<HBBQQQI")
ENTRY_SIZE = _ENTRY.size  # 32
_E_CODEC, _E_RESERVED, _E_RAW, _E_OFFSET = 2, 3, 4, 20

# Bodies are compressed and written in pieces of this many raw bytes, so a writer never holds more than
# one piece of compressed output (the raw body is the caller's).
CHUNK = 4 << 20

SectionNames = Mapping[int, str]


@dataclass(frozen=True, slots=True)
class SectionEntry:
    """One row of the section table."""

    type: int
    codec: int
    raw_length: int
    stored_length: int
    offset: int  # file offset of the first stored byte
    crc32c: int  # CRC32C of the stored (possibly compressed) bytes

    @property
    def end(self) -> int:
        return self.offset + self.stored_length


def table_end(count: int) -> int:
    """File offset just past the table CRC = where the first body starts."""
    return HEADER_SIZE + count * ENTRY_SIZE + _U32.size


def check_section_types(types: Iterable[int]) -> None:
    """Writers' precondition: u16 types, each at most once."""
    seen: set[int] = set()
    for t in types:
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= MAX_SECTION_TYPE:
            raise ValueError(f"section type {t!r} is not an integer in 0..{MAX_SECTION_TYPE}")
        if t in seen:
            raise ValueError(f"section type {t} is added twice (sections are unique by type)")
        seen.add(t)


def section_name(section_type: int, names: SectionNames | None) -> str | None:
    return None if names is None else names.get(section_type)


def _err(
    path: str, offset: int, reason: str, entry_type: int | None = None, names: SectionNames | None = None
) -> SnapshotFormatError:
    label = None if entry_type is None else section_name(entry_type, names)
    return SnapshotFormatError(path, offset, reason, section=entry_type, section_name=label)


# --- header ---------------------------------------------------------------------------------------------


def encode_header(count: int) -> bytes:
    if not 0 <= count <= MAX_SECTIONS:
        raise ValueError(f"section count {count} is out of range 0..{MAX_SECTIONS}")
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, count, bytes(16))
    return head + _U32.pack(crc32c(head))


def decode_header(head: bytes, file_size: int, path: str) -> int:
    """Check the first HEADER_SIZE bytes (fewer if the file is shorter); return the section count.

    Order: magic, version (so a newer file says so instead of "bad CRC"), CRC, then the fields the CRC
    vouches for."""
    if head[: len(MAGIC)] != MAGIC[: len(head)]:
        raise _err(path, 0, f"bad magic {bytes(head[:8])!r}, expected {MAGIC!r}: not a snapshot data file")
    if file_size < HEADER_SIZE:
        raise _err(path, file_size, f"truncated file: {file_size} bytes, shorter than the {HEADER_SIZE}-byte header")
    magic, version, flags, count, reserved = _HEADER.unpack_from(head)
    if version != FORMAT_VERSION:
        raise _err(path, 8, f"unknown format version {version} (this reader knows version {FORMAT_VERSION})")
    (stored,) = _U32.unpack_from(head, _HEADER.size)
    computed = crc32c(head[: _HEADER.size])
    if stored != computed:
        raise _err(path, _HEADER.size, f"bad header CRC: stored {stored:#010x}, computed {computed:#010x}")
    if flags:
        raise _err(path, 10, f"unknown header flags {flags:#06x}")
    if any(reserved):
        first = next(i for i, b in enumerate(reserved) if b)
        raise _err(path, _RESERVED_AT + first, "reserved header bytes are not zero")
    if count > MAX_SECTIONS:
        raise _err(path, 12, f"section count {count} exceeds the {MAX_SECTIONS} possible section types")
    return count


# --- section table --------------------------------------------------------------------------------------


def encode_table(entries: Iterable[SectionEntry]) -> bytes:
    table = b"".join(
        _ENTRY.pack(e.type, e.codec, 0, e.raw_length, e.stored_length, e.offset, e.crc32c) for e in entries
    )
    return table + _U32.pack(crc32c(table))


def decode_table(
    table: bytes, count: int, file_size: int, path: str, known_types: SectionNames | None = None
) -> list[SectionEntry]:
    """Check the table (bytes HEADER_SIZE..table_end(count) of the file) and the layout it describes:
    CRC, codecs, reserved bytes, unique types (and known ones, when a registry `known_types` is given),
    contiguous bodies, and that the file ends exactly where the last body ends."""
    names = known_types  # also used to label sections in messages
    end = table_end(count)
    if file_size < end:
        raise _err(
            path, file_size, f"truncated file: it ends inside the section table ({count} sections need {end} bytes)"
        )
    body = table[: count * ENTRY_SIZE]
    (stored,) = _U32.unpack_from(table, count * ENTRY_SIZE)
    computed = crc32c(body)
    if stored != computed:
        raise _err(path, end - _U32.size, f"bad section table CRC: stored {stored:#010x}, computed {computed:#010x}")
    entries: list[SectionEntry] = []
    seen: dict[int, int] = {}
    expected = end
    for i in range(count):
        at = HEADER_SIZE + i * ENTRY_SIZE
        stype, codec, reserved, raw_len, stored_len, offset, crc = _ENTRY.unpack_from(body, i * ENTRY_SIZE)
        if stype in seen:
            raise _err(path, at, f"duplicate section type {stype} (table entries {seen[stype]} and {i})", stype, names)
        seen[stype] = i
        if names is not None and stype not in names:
            raise _err(path, at, f"unknown section type {stype} (table entry {i})", stype, names)
        if codec not in CODEC_NAMES:
            raise _err(path, at + _E_CODEC, f"unknown codec {codec}", stype, names)
        if reserved:
            raise _err(path, at + _E_RESERVED, "reserved table byte is not zero", stype, names)
        if codec == CODEC_RAW and raw_len != stored_len:
            reason = f"length mismatch: raw section with raw length {raw_len}, stored length {stored_len}"
            raise _err(path, at + _E_RAW, reason, stype, names)
        if offset != expected:
            reason = f"section offset {offset}, expected {expected} (bodies are contiguous, in table order)"
            raise _err(path, at + _E_OFFSET, reason, stype, names)
        expected += stored_len
        entries.append(SectionEntry(stype, codec, raw_len, stored_len, offset, crc))
    if file_size < expected:
        cut = next(e for e in entries if e.end > file_size)
        reason = f"truncated file: it ends at byte {file_size}, inside this section [{cut.offset}, {cut.end})"
        raise _err(path, file_size, reason, cut.type, names)
    if file_size > expected:
        raise _err(path, expected, f"trailing garbage: {file_size - expected} byte(s) after the last section")
    return entries


# --- bodies ---------------------------------------------------------------------------------------------


def iter_encode_body(body: bytes | memoryview, codec: int = CODEC_LZ4, level: int = 0) -> Iterator[bytes]:
    """The stored form of `body`, in pieces (so a big body is never held compressed in full)."""
    view = memoryview(body).cast("B")
    if codec == CODEC_RAW:
        for i in range(0, len(view), CHUNK):
            yield bytes(view[i : i + CHUNK])  # google_crc32c takes bytes only
        return
    if codec != CODEC_LZ4:
        raise ValueError(f"unknown codec {codec}")
    comp = lz4.frame.LZ4FrameCompressor(compression_level=level, content_checksum=False)
    yield comp.begin(source_size=len(view))
    for i in range(0, len(view), CHUNK):
        piece = comp.compress(view[i : i + CHUNK])
        if piece:
            yield piece
    yield comp.flush()


def iter_encode_pieces(pieces: Iterable[bytes], codec: int = CODEC_LZ4, level: int = 0) -> Iterator[bytes]:
    """The stored form of a body given as pieces (a lazily encoded section); the raw length is the sum of
    the pieces. The lz4 frame then carries no content size (the section table has the raw length)."""
    if codec == CODEC_RAW:
        for piece in pieces:
            if piece:
                yield bytes(piece)
        return
    if codec != CODEC_LZ4:
        raise ValueError(f"unknown codec {codec}")
    comp = lz4.frame.LZ4FrameCompressor(compression_level=level, content_checksum=False)
    yield comp.begin()
    for piece in pieces:
        out = comp.compress(piece)
        if out:
            yield out
    yield comp.flush()


def decode_body(stored: bytes, entry: SectionEntry, path: str, known_types: SectionNames | None = None) -> bytes:
    """Check the stored bytes of one section against its table entry; return the raw body."""
    reason: str | None
    if len(stored) != entry.stored_length:  # the caller read past the end of a file that shrank under it
        reason = f"truncated section: {len(stored)} of {entry.stored_length} stored bytes"
        raise _err(path, entry.offset + len(stored), reason, entry.type, known_types)
    computed = crc32c(stored)
    if computed != entry.crc32c:
        reason = f"bad section CRC over bytes [{entry.offset}, {entry.end}): stored {entry.crc32c:#010x}, computed {computed:#010x}"
        raise _err(path, entry.offset, reason, entry.type, known_types)
    if entry.codec == CODEC_RAW:
        return stored
    dec = lz4.frame.LZ4FrameDecompressor()
    try:
        raw = dec.decompress(stored, max_length=min(entry.raw_length + 1, sys.maxsize))
    except RuntimeError as e:
        raise _err(path, entry.offset, f"lz4 frame cannot be decoded: {e}", entry.type, known_types) from None
    reason = None
    if len(raw) > entry.raw_length:
        reason = f"length mismatch: decompressed to more than {entry.raw_length} bytes, the table's raw length"
    elif not dec.eof:
        reason = f"not a complete lz4 frame ({len(raw)} bytes decoded before the data ran out)"
    elif dec.unused_data:
        reason = f"{len(dec.unused_data)} bytes after the end of the lz4 frame"
    elif len(raw) != entry.raw_length:
        reason = f"length mismatch: decompressed to {len(raw)} bytes, the table's raw length is {entry.raw_length}"
    if reason:
        raise _err(path, entry.offset, reason, entry.type, known_types)
    return raw


# --- whole files in memory (tests, offline tools) -------------------------------------------------------


def encode_file(sections: Iterable[tuple[int, bytes]], codec: int = CODEC_LZ4, level: int = 0) -> bytes:
    """A complete data file in memory. Streaming writers use `rw.SnapshotWriter` instead."""
    items = list(sections)
    check_section_types([t for t, _ in items])
    offset = table_end(len(items))
    entries: list[SectionEntry] = []
    bodies: list[bytes] = []
    for stype, body in items:
        stored = b"".join(iter_encode_body(body, codec, level))
        entries.append(SectionEntry(stype, codec, len(body), len(stored), offset, crc32c(stored)))
        bodies.append(stored)
        offset += len(stored)
    return encode_header(len(items)) + encode_table(entries) + b"".join(bodies)


def decode_file(data: bytes, path: str = "<memory>", known_types: SectionNames | None = None) -> dict[int, bytes]:
    """Check a complete data file held in memory; return {section type: raw body} in file order."""
    count = decode_header(data[:HEADER_SIZE], len(data), path)
    entries = decode_table(data[HEADER_SIZE : table_end(count)], count, len(data), path, known_types)
    return {e.type: decode_body(data[e.offset : e.end], e, path, known_types) for e in entries}


# --- the meta file (`__raft_snapshot_meta`) -------------------------------------------------------------

META_MAGIC = b"RMQSMETA"
META_VERSION = 1
# magic[8] version:u16 flags:u16 body_len:u32, then the msgpack body, then crc:u32 over everything before it.
_META_HEAD = struct.Struct("<8sHHI")
META_HEAD_SIZE = _META_HEAD.size  # 16
META_FILE = "__raft_snapshot_meta"


def check_file_name(name: object) -> str | None:
    """Why `name` cannot be a file of a snapshot directory, or None. Names come from the network too
    (InstallSnapshot copies the files a leader's meta lists), so nothing may escape the directory."""
    if not isinstance(name, str) or not name:
        return f"file name {name!r} is not a non-empty string"
    if name in (".", "..", META_FILE) or "/" in name or "\\" in name or "\x00" in name:
        return f"file name {name!r} is not allowed (a plain name other than {META_FILE})"
    return None


def encode_meta(meta: SnapshotMeta) -> bytes:
    for f in meta.files:
        bad = check_file_name(f.name)
        if bad:
            raise ValueError(bad)
    names = [f.name for f in meta.files]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate file names in {names}")
    if any(not isinstance(k, str) for k in meta.user_meta):
        raise ValueError("user_meta keys must be strings")
    doc = {
        "last_included_index": meta.last_included_index,
        "last_included_term": meta.last_included_term,
        "voters": list(meta.voters),
        "learners": list(meta.learners),
        "files": [{"name": f.name, "size": f.size, "crc32c": f.crc32c} for f in meta.files],
        "created_at": float(meta.created_at),
        "user_meta": dict(meta.user_meta),
    }
    if meta.addresses:  # an optional key: written only when there are addresses, absent means none
        # [id, raft, http] or, when the remoting address is known, [id, raft, http, remoting]
        doc["addresses"] = [list(a) if a[3] else list(a[:3]) for a in meta.addresses]
    body = msgpack.packb(doc, use_bin_type=True)
    head = _META_HEAD.pack(META_MAGIC, META_VERSION, 0, len(body)) + body
    return head + _U32.pack(crc32c(head))


def decode_meta(data: bytes, path: str) -> SnapshotMeta:
    """Check and decode a whole meta file. Every problem is a SnapshotFormatError naming the byte."""
    size = len(data)
    if data[:8] != META_MAGIC[: min(size, 8)]:
        raise _err(path, 0, f"bad magic {data[:8]!r}, expected {META_MAGIC!r}: not a snapshot meta file")
    if size < META_HEAD_SIZE + _U32.size:
        raise _err(path, size, f"truncated file: {size} bytes, a meta file has at least {META_HEAD_SIZE + 4}")
    _, version, flags, body_len = _META_HEAD.unpack_from(data)
    if version != META_VERSION:
        raise _err(path, 8, f"unknown meta format version {version} (this reader knows version {META_VERSION})")
    end = META_HEAD_SIZE + body_len
    if size != end + _U32.size:
        what = "truncated file" if size < end + _U32.size else "trailing garbage"
        reason = f"length mismatch ({what}?): body length {body_len} means {end + 4} bytes, the file has {size}"
        raise _err(path, 12, reason)
    (stored,) = _U32.unpack_from(data, end)
    computed = crc32c(data[:end])
    if stored != computed:
        raise _err(path, end, f"bad meta CRC: stored {stored:#010x}, computed {computed:#010x}")
    if flags:
        raise _err(path, 10, f"unknown meta flags {flags:#06x}")
    try:
        doc = msgpack.unpackb(data[META_HEAD_SIZE:end], raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise _err(path, META_HEAD_SIZE, f"meta body is not valid msgpack: {e}") from None
    try:
        return _meta_from(doc)
    except ValueError as e:
        raise _err(path, META_HEAD_SIZE, f"bad meta body: {e}") from None


def _meta_from(doc: object) -> SnapshotMeta:
    if not isinstance(doc, dict):
        raise ValueError(f"expected a map, got {type(doc).__name__}")

    def get(key: str, kinds: type | tuple[type, ...]) -> Any:
        if key not in doc:
            raise ValueError(f"missing field {key!r}")
        v = doc[key]
        if isinstance(v, bool) or not isinstance(v, kinds):
            raise ValueError(f"field {key!r} has type {type(v).__name__}")
        if isinstance(v, int) and v < 0:
            raise ValueError(f"field {key!r} is negative: {v}")
        return v

    def strings(key: str) -> tuple[str, ...]:
        v = get(key, list)
        if not all(isinstance(x, str) for x in v):
            raise ValueError(f"field {key!r} is not a list of strings")
        return tuple(v)

    files: list[FileMeta] = []
    for i, f in enumerate(get("files", list)):
        if not isinstance(f, dict):
            raise ValueError(f"files[{i}] is not a map")
        name, fsize, fcrc = f.get("name"), f.get("size"), f.get("crc32c")
        bad = check_file_name(name)
        if bad:
            raise ValueError(f"files[{i}]: {bad}")
        for key, v, top in (("size", fsize, None), ("crc32c", fcrc, 0xFFFFFFFF)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (top is not None and v > top):
                raise ValueError(f"files[{i}].{key} is not a valid unsigned integer: {v!r}")
        if any(x.name == name for x in files):
            raise ValueError(f"files[{i}]: duplicate file name {name!r}")
        assert isinstance(name, str) and isinstance(fsize, int) and isinstance(fcrc, int)  # checked above
        files.append(FileMeta(name, fsize, fcrc))
    user_meta = get("user_meta", dict)
    addresses = doc.get("addresses", [])
    if not isinstance(addresses, list) or not all(
        isinstance(a, list) and len(a) in (3, 4) and all(isinstance(x, str) for x in a) for a in addresses
    ):
        raise ValueError(
            "field 'addresses' is not a list of [id, raft address, http address(, remoting address)] strings"
        )
    index, term = get("last_included_index", int), get("last_included_term", int)
    conf = ConfState(  # ValueError, a bad meta body, for a configuration that cannot be (ConfState's rules)
        strings("voters"),
        strings("learners"),
        tuple((a[0], a[1], a[2], a[3] if len(a) == 4 else "") for a in addresses),
    )
    return SnapshotMeta(
        index=index,
        term=term,
        conf=conf,
        files=tuple(files),
        created_at=float(get("created_at", (float, int))),
        user_meta=user_meta,
    )
