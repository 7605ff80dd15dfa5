"""SnapshotWriter and SnapshotReader: the state machine's view of one sectioned data file.

Threading (the RIP-59 save path): the apply thread calls each manager's `encode_snapshot()` (fast,
point-in-time msgpack bytes) and `add_section()`, which only keeps a reference to the immutable bytes.
It then hands the writer to a writer thread, which calls `finish()`: lz4 compression, CRCs, the writes
and the fsync all happen there, so applying stalls only for the encoding. After the hand-over the apply
thread must not touch the writer again; the writer has no lock of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from google_crc32c import extend as crc32c_extend

from snapshot.errors import SnapshotError, SnapshotFormatError
from snapshot.format import (
    CODEC_LZ4,
    CODEC_NAMES,
    HEADER_SIZE,
    SectionEntry,
    SectionNames,
    check_section_types,
    decode_body,
    decode_header,
    decode_table,
    encode_header,
    encode_table,
    iter_encode_body,
    iter_encode_pieces,
    section_name,
    table_end,
)


class SnapshotAbleMetadataManager(Protocol):
    """RIP-59: a table of the controller that owns one section of the snapshot."""

    def section_type(self) -> int:
        """This manager's section type (u16), unique within a snapshot and stable across versions."""

    def encode_snapshot(self) -> bytes:
        """A point-in-time image of the table as msgpack bytes. Runs on the apply thread: keep it fast,
        and return bytes nobody mutates afterwards."""

    def load_snapshot(self, body: bytes) -> None:
        """Replace the table with the image `body` (what `encode_snapshot` returned)."""


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """What `SnapshotWriter.finish()` wrote."""

    path: Path
    size: int
    sections: tuple[SectionEntry, ...]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    """Up to `size` bytes at `offset`; fewer only at the end of the file (one read is capped near 2 GiB)."""
    parts: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 30), offset)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _Parts:
    """A section body given as parts to join on the writer thread (`SnapshotWriter.add_section_parts`)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts


_Body = bytes | Callable[[], Iterable[bytes]] | _Parts


class SnapshotWriter:
    """Collects sections cheaply, then `finish()` writes and fsyncs the data file, on any thread.

    The file is created with O_EXCL (never overwritten). Bodies are written from offset
    `table_end(count)` on, one compressed piece at a time; the header and table go in last, at offset 0,
    so a file cut short by a crash has no valid header. `known_types` (a registry {type: name}) rejects
    unregistered types early; the reader applies the same registry.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        codec: int = CODEC_LZ4,
        level: int = 0,
        known_types: SectionNames | None = None,
    ) -> None:
        if codec not in CODEC_NAMES:
            raise ValueError(f"unknown codec {codec}")
        self.path = Path(path)
        self.codec = codec
        self.level = level
        self.known_types = known_types
        self._sections: list[tuple[int, _Body, int]] = []
        self._types: set[int] = set()
        self.result: WrittenFile | None = None
        self._closed = False

    @property
    def finished(self) -> bool:
        return self.result is not None

    def add_section(self, section_type: int, body: bytes | bytearray | memoryview, *, codec: int | None = None) -> None:
        """Register `body` (msgpack bytes) as section `section_type`. Cheap: no copy of `bytes`; a
        bytearray or memoryview is copied so later changes by the caller cannot leak in."""
        if not isinstance(body, bytes):
            if not isinstance(body, bytearray | memoryview):
                raise TypeError(f"section body must be bytes, got {type(body).__name__}")
            body = bytes(body)
        self._add("add_section", section_type, body, codec)

    def add_section_parts(self, section_type: int, parts: list[bytes], *, codec: int | None = None) -> None:
        """Register a section whose body is `b"".join(parts)`, joined ON THE WRITER THREAD during finish(): for a
        table whose rows are kept as msgpack bytes, so that the apply thread only collects them (the list is
        the caller's no more). The file is byte for byte what `add_section(type, b"".join(parts))` writes."""
        if not isinstance(parts, list) or (parts and not isinstance(parts[0], bytes)):
            raise TypeError(f"parts must be a list of bytes, got {type(parts).__name__}")
        self._add("add_section_parts", section_type, _Parts(parts), codec)

    def add_section_lazy(
        self, section_type: int, produce: Callable[[], Iterable[bytes]], *, codec: int | None = None
    ) -> None:
        """Register a section whose msgpack body `produce()` yields in pieces, ON THE WRITER THREAD during
        finish(). For big tables: the apply thread hands over an immutable view (e.g. a shallow copy)
        and returns at once; encoding happens later in small pieces, so the GIL changes hands between
        pieces and applying is not stalled by the encoding. `produce` must read only that view."""
        if not callable(produce):
            raise TypeError(f"produce must be callable, got {type(produce).__name__}")
        self._add("add_section_lazy", section_type, produce, codec)

    def _add(self, what: str, section_type: int, body: _Body, codec: int | None) -> None:
        if self._closed:
            raise SnapshotError(f"{self.path}: {what} after finish() or abort()")
        check_section_types([*self._types, section_type])
        if self.known_types is not None and section_type not in self.known_types:
            raise ValueError(f"section type {section_type} is not in the registry of known types")
        codec = self.codec if codec is None else codec
        if codec not in CODEC_NAMES:
            raise ValueError(f"unknown codec {codec}")
        self._types.add(section_type)
        self._sections.append((section_type, body, codec))

    def add_manager(self, manager: SnapshotAbleMetadataManager) -> None:
        self.add_section(manager.section_type(), manager.encode_snapshot())

    def section_types(self) -> list[int]:
        return [t for t, _, _ in self._sections]

    def finish(self) -> WrittenFile:
        """Compress, checksum, write and fsync the file. The expensive part; call it on a writer thread.
        On an error the partial file is removed; either way the writer cannot be reused."""
        if self._closed:
            raise SnapshotError(f"{self.path}: finish() called twice, or after abort()")
        self._closed = True
        sections, self._sections = self._sections, []  # drop our references to the bodies as we go
        count = len(sections)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            offset = table_end(count)
            os.lseek(fd, offset, os.SEEK_SET)
            entries: list[SectionEntry] = []
            sections.reverse()
            while sections:  # pop each body so its memory can go as soon as it is written
                stype, body, codec = sections.pop()
                crc = stored = 0
                if isinstance(body, _Parts):
                    body = b"".join(body.parts)
                if callable(body):
                    raw = [0]

                    def counted(pieces: Iterable[bytes], raw: list[int] = raw) -> Iterable[bytes]:
                        for piece in pieces:
                            raw[0] += len(piece)
                            yield piece

                    encoded = iter_encode_pieces(counted(body()), codec, self.level)
                else:
                    raw = [len(body)]
                    encoded = iter_encode_body(body, codec, self.level)
                for piece in encoded:
                    crc = crc32c_extend(crc, piece)
                    stored += len(piece)
                    _write_all(fd, piece)
                entries.append(SectionEntry(stype, codec, raw[0], stored, offset, crc))
                offset += stored
            _pwrite_all(fd, encode_header(count) + encode_table(entries), 0)
            os.fsync(fd)
        except Exception:
            os.close(fd)
            self.path.unlink(missing_ok=True)
            raise
        except BaseException:  # interrupted: leave the file as a crash would; the temp dir goes later
            os.close(fd)
            raise
        os.close(fd)
        self.result = WrittenFile(self.path, offset, tuple(entries))
        return self.result

    def abort(self) -> None:
        """Forget the sections; remove the file if finish() wrote one."""
        self._closed = True
        self._sections = []
        if self.result is not None:
            self.path.unlink(missing_ok=True)


class SnapshotReader:
    """Reads sections of one data file. Opening checks the header, the table and the layout against the
    file size (cheap); `section()` checks that section's CRC, decompressed length and lz4 frame; `verify()`
    does that for every section. Any damage raises SnapshotFormatError (path, section, byte offset).

    `known_types`, when given, is the registry {type: name}: an unlisted section type is an error, and
    messages name sections. The reader keeps the file open (so a rename, e.g. quarantine, does not
    disturb it) until `close()`.
    """

    def __init__(self, path: str | os.PathLike[str], *, known_types: SectionNames | None = None) -> None:
        self.path = Path(path)
        self.known_types = known_types
        self._fd: int | None = None
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise SnapshotFormatError(self.path, 0, "missing file") from None
        try:
            self.size = os.fstat(self._fd).st_size
            head = _pread_all(self._fd, HEADER_SIZE, 0)
            count = decode_header(head, self.size, str(self.path))
            table = _pread_all(self._fd, table_end(count) - HEADER_SIZE, HEADER_SIZE)
            entries = decode_table(table, count, self.size, str(self.path), known_types)
        except BaseException:
            self.close()
            raise
        self._entries: dict[int, SectionEntry] = {e.type: e for e in entries}

    @property
    def entries(self) -> tuple[SectionEntry, ...]:
        """The section table, in file order (for inspection tools)."""
        return tuple(self._entries.values())

    def section_types(self) -> list[int]:
        """Section types in file order (= the order they were added)."""
        return list(self._entries)

    def entry(self, section_type: int) -> SectionEntry:
        """The table entry of a section. KeyError if the file has no such section."""
        entry = self._entries.get(section_type)
        if entry is None:
            raise KeyError(f"{self.path}: no section {section_type}")
        return entry

    def section_name(self, section_type: int) -> str | None:
        return section_name(section_type, self.known_types)

    def __contains__(self, section_type: object) -> bool:
        return section_type in self._entries

    def section(self, section_type: int) -> bytes:
        """The raw (decompressed, verified) body of a section. KeyError if the file has no such section."""
        entry = self.entry(section_type)
        if self._fd is None:
            raise SnapshotError(f"{self.path}: reader is closed")
        stored = _pread_all(self._fd, entry.stored_length, entry.offset)
        return decode_body(stored, entry, str(self.path), self.known_types)

    def verify(self) -> None:
        """Check every section (CRC, lz4 frame, decompressed length) without keeping the bodies."""
        for t in self._entries:
            self.section(t)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SnapshotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            self.close()


# Exceptions a manager's load_snapshot raises for a body it cannot decode (msgpack errors are ValueErrors).
_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError)


def save_managers(writer: SnapshotWriter, managers: Iterable[SnapshotAbleMetadataManager]) -> None:
    """The apply-thread half of a save: one section per manager (then hand `writer` to a writer thread)."""
    for m in managers:
        writer.add_manager(m)


def load_managers(
    reader: SnapshotReader, managers: Iterable[SnapshotAbleMetadataManager], *, allow_missing: bool = False
) -> None:
    """Feed each manager its section. A section the manager cannot decode becomes a SnapshotFormatError
    (so `FileSnapshotStorage.load_newest` can quarantine the snapshot and fall back). A missing section is a
    KeyError unless `allow_missing` (then that manager is left as it is)."""
    seen: dict[int, str] = {}
    for m in managers:
        t = m.section_type()
        if t in seen:
            raise ValueError(f"managers {seen[t]} and {type(m).__name__} share section type {t}")
        seen[t] = type(m).__name__
        if t not in reader:
            if allow_missing:
                continue
            raise KeyError(f"{reader.path}: no section {t} for {type(m).__name__}")
        body = reader.section(t)
        try:
            m.load_snapshot(body)
        except _DECODE_ERRORS as e:
            reason = f"{type(m).__name__}.load_snapshot cannot decode the section: {e!r}"
            name = reader.section_name(t)
            raise SnapshotFormatError(reader.path, reader.entry(t).offset, reason, section=t, section_name=name) from e
