"""Helpers shared by the section codecs: canonical msgpack out, strict checks in.

Decoders raise ValueError (what snapshot.rw.load_managers turns into a SnapshotFormatError, so that a bad
snapshot is quarantined instead of half-loaded). They insist on the canonical form the encoders write
(rows strictly sorted by key), so that load -> encode gives back the very same bytes.
"""

from __future__ import annotations

import msgpack

from statemachine.sections import SECTION_NAMES, SECTION_VERSION
from statemachine.values import Unpacked


def pack(*parts: object) -> bytes:
    """A section body: [SECTION_VERSION, *parts]."""
    return msgpack.packb([SECTION_VERSION, *parts])


def array_header(n: int) -> bytes:
    """The shortest msgpack array header for n items, the one msgpack.packb writes."""
    if n < 16:
        return bytes((0x90 | n,))
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def pack_rows(rows: list[bytes]) -> bytes:
    """packb([SECTION_VERSION, rows]) where each row is already msgpack bytes: the same bytes, without
    decoding and re-encoding rows that did not change."""
    return array_header(2) + msgpack.packb(SECTION_VERSION) + array_header(len(rows)) + b"".join(rows)


def _doc(what: str, body: bytes) -> list[Unpacked]:
    try:
        doc = msgpack.unpackb(body)
    except Exception as e:  # msgpack raises several exception types for bad bytes
        raise ValueError(f"{what}: not msgpack: {type(e).__name__}: {e}") from None
    if type(doc) is not list or not doc:
        raise ValueError(f"{what}: body is not a msgpack array [version, ...]")
    return doc


def version_of(section_type: int, body: bytes, known: tuple[int, ...]) -> int:
    """The layout version of a section body that has more than one readable layout; refuses unknown ones."""
    what = SECTION_NAMES[section_type]
    v = _doc(what, body)[0]
    if type(v) is not int or v not in known:
        raise ValueError(f"{what}: unsupported body version {v!r} (this reader knows {', '.join(map(str, known))})")
    return v


def unpack(section_type: int, body: bytes, parts: int, version: int = SECTION_VERSION) -> list[Unpacked]:
    """The parts after the version of a section body, checked for shape."""
    what = SECTION_NAMES[section_type]
    doc = _doc(what, body)
    if doc[0] != version or type(doc[0]) is not int:
        raise ValueError(f"{what}: unsupported body version {doc[0]!r} (this reader knows {version})")
    if len(doc) != 1 + parts:
        raise ValueError(f"{what}: {len(doc) - 1} parts after the version, expected {parts}")
    return doc[1:]


# The `what` messages are str.format templates filled only on failure: loading a big section checks every
# row, and formatting a message per row would cost more than the checks.


def check(ok: bool, what: str, *args: object) -> None:
    if not ok:
        raise ValueError(what.format(*args))


def rows(v: Unpacked, width: int, what: str, *args: object) -> list[list[Unpacked]]:
    if not (type(v) is list and all(type(r) is list and len(r) == width for r in v)):
        raise ValueError(f"{what.format(*args)}: not rows of {width} items")
    return v


def ints(v: Unpacked, what: str, *args: object) -> list[int]:
    if not (type(v) is list and all(type(x) is int for x in v)):
        raise ValueError(f"{what.format(*args)}: not a list of integers")
    ascending(v, what, *args)
    return v


def ascending(keys: list[Unpacked], what: str, *args: object) -> None:
    if not all(a < b for a, b in zip(keys, keys[1:], strict=False)):
        raise ValueError(f"{what.format(*args)}: keys not strictly ascending")


def is_int(v: object) -> bool:
    return type(v) is int


def is_str(v: object) -> bool:
    return type(v) is str
