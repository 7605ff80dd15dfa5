"""Whose data a data directory holds: `<data_dir>/IDENTITY` names the raft group and the node.

The node writes it at its first start (or at the first start of a directory made before the file existed)
and checks it at every later start, so a node pointed at another node's or another group's data refuses to
start instead of voting and appending with someone else's term, vote and log. Offline tools (the audit)
read it to label a directory by its data rather than by its name. Layout (docs/log-format.md, "IDENTITY"):

    magic "RMID"[4] version:u16 group_len:u16 node_len:u16, group (UTF-8), node (UTF-8), crc32c:u32

all little-endian; the CRC covers every byte before it. Written with `atomic_write` (temp file, fsync,
rename, fsync the directory), so a crash leaves no file or the whole file.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from google_crc32c import value as _crc

from raft.leaf.durable import atomic_write
from raft.status import RaftBaseError

IDENTITY_FILE = "IDENTITY"
IDENTITY_MAGIC = b"RMID"
IDENTITY_VERSION = 1
_HEAD = struct.Struct("<4sHHH")
_CRC = struct.Struct("<I")
_MAX_NAME = 0xFFFF


class IdentityError(RaftBaseError):
    """The identity file is damaged or names another node or group; the node must not start on this data.
    `path` is the file; `offset` the byte where a damaged file first goes wrong."""

    def __init__(self, message: str, path: str = "", offset: int = 0) -> None:
        super().__init__(message)
        self.path, self.offset = path, offset


def _damaged(path: str, offset: int, reason: str) -> IdentityError:
    return IdentityError(f"{path}: at byte offset {offset}: {reason}", path, offset)


@dataclass(frozen=True)
class DataDirIdentity:
    group: str
    node: str


def encode_identity(ident: DataDirIdentity) -> bytes:
    group, node = ident.group.encode(), ident.node.encode()
    for what, raw in (("group id", group), ("node id", node)):
        if not raw or len(raw) > _MAX_NAME:
            raise ValueError(f"{what} must be 1..{_MAX_NAME} bytes of UTF-8, got {len(raw)}")
    body = _HEAD.pack(IDENTITY_MAGIC, IDENTITY_VERSION, len(group), len(node)) + group + node
    return body + _CRC.pack(_crc(body))


def decode_identity(data: bytes, path: str) -> DataDirIdentity:
    """Raises IdentityError naming `path` and the byte offset of the first thing wrong."""
    if len(data) < _HEAD.size + _CRC.size:
        raise _damaged(path, 0, f"{len(data)} bytes is too short for an identity file")
    magic, version, group_len, node_len = _HEAD.unpack_from(data)
    if magic != IDENTITY_MAGIC:
        raise _damaged(path, 0, f"bad magic {magic!r} (expected {IDENTITY_MAGIC!r})")
    if version != IDENTITY_VERSION:
        raise _damaged(path, 4, f"unsupported identity format version {version}")
    end = _HEAD.size + group_len + node_len
    if len(data) != end + _CRC.size:
        raise _damaged(path, 6, f"lengths {group_len}+{node_len} do not match the file's {len(data)} bytes")
    (crc,) = _CRC.unpack_from(data, end)
    if _crc(data[:end]) != crc:
        raise _damaged(path, end, "CRC mismatch")
    try:
        group = data[_HEAD.size : _HEAD.size + group_len].decode()
        node = data[_HEAD.size + group_len : end].decode()
    except UnicodeDecodeError as e:
        raise _damaged(path, _HEAD.size, "group or node id is not UTF-8") from e
    return DataDirIdentity(group, node)


def read_identity(data_dir: str) -> DataDirIdentity | None:
    """The directory's identity, or None when it has no IDENTITY file (a directory made before it existed)."""
    path = os.path.join(data_dir, IDENTITY_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return decode_identity(data, path)


def claim_identity(data_dir: str, group: str, node: str) -> bool:
    """At a node's start, with the directory's lock held: write the identity if the directory has none (True),
    or check that it names this group and node (False). Raises IdentityError, with the fix, if it names
    another one or is damaged; nothing is written then."""
    want = DataDirIdentity(group, node)
    path = os.path.join(data_dir, IDENTITY_FILE)
    try:
        have = read_identity(data_dir)
    except IdentityError as e:
        raise IdentityError(
            f"{e}; the node will not start on data it cannot attribute. If this directory is "
            f"really node {node!r}'s of group {group!r}, restore {IDENTITY_FILE} from a backup "
            f"or delete it (the next start writes it again)",
            e.path,
            e.offset,
        ) from e
    if have is None:
        atomic_write(data_dir, IDENTITY_FILE, encode_identity(want))
        return True
    if have != want:
        raise IdentityError(
            f"{path}: this data directory belongs to node {have.node!r} of group {have.group!r}, but this node "
            f"is {node!r} of group {group!r}; refusing to start on another node's data. Fix: point "
            f"controllerStorePath at the data directory of node {node!r} (an empty one if it has none; it "
            f"then catches up from the leader)",
            path,
        )
    return False
