"""Small metadata files replaced atomically, and FileMetaStorage (term and vote) built on them.

Durable replace = write `<name>.tmp`, fsync it, rename over `<name>`, fsync the directory. A crash leaves
either the old or the new file, never a mix; a leftover `.tmp` is ignored and overwritten next time.
Layout of `raft_meta` is specified in docs/log-format.md.
"""

from __future__ import annotations

import os
import struct

from google_crc32c import value as _crc

from raft.core.messages import HardState
from raft.leaf import failpoint
from raft.leaf.durable import atomic_write, ensure_dir
from raft.status import RaftBaseError

META_FILE = "raft_meta"
META_MAGIC = b"RMTA"
META_VERSION = 1
# magic[4] version:u16 vote_len:u16 term:u64, then vote (UTF-8), then crc:u32 over everything before it.
_META_HEAD = struct.Struct("<4sHHQ")
_CRC = struct.Struct("<I")
_MAX_VOTE = 0xFFFF


class MetaCorruptionError(RaftBaseError):
    """The term/vote file exists but cannot be trusted. Starting anyway could double-vote, so stop.

    Like LogCorruptionError it carries where: the file, the byte offset its first failing check looks at,
    and why."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: at byte offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


def encode_hard_state(hs: HardState) -> bytes:
    vote = hs.vote.encode()
    if len(vote) > _MAX_VOTE:
        raise ValueError(f"vote {hs.vote[:40]!r}... is longer than {_MAX_VOTE} bytes")
    if hs.term < 0:
        raise ValueError(f"negative term {hs.term}")
    body = _META_HEAD.pack(META_MAGIC, META_VERSION, len(vote), hs.term) + vote
    return body + _CRC.pack(_crc(body))


def decode_hard_state(data: bytes, path: str) -> HardState:
    if len(data) < _META_HEAD.size + _CRC.size:
        raise MetaCorruptionError(path, len(data), f"{len(data)} bytes is too short for a meta file")
    magic, version, vote_len, term = _META_HEAD.unpack_from(data)
    if magic != META_MAGIC:
        raise MetaCorruptionError(path, 0, f"bad magic {magic!r}")
    if version != META_VERSION:
        raise MetaCorruptionError(path, 4, f"unsupported meta format version {version}")
    end = _META_HEAD.size + vote_len
    if len(data) != end + _CRC.size:
        raise MetaCorruptionError(path, 6, f"length {len(data)} does not match vote length {vote_len}")
    (crc,) = _CRC.unpack_from(data, end)
    if _crc(data[:end]) != crc:
        raise MetaCorruptionError(path, end, f"CRC mismatch over bytes [0, {end})")
    try:
        vote = data[_META_HEAD.size : end].decode()
    except UnicodeDecodeError as e:
        raise MetaCorruptionError(path, _META_HEAD.size, "vote is not UTF-8") from e
    return HardState(term=term, vote=vote)


def read_hard_state(path: str | os.PathLike[str]) -> HardState | None:
    """Term and vote from a `raft_meta` file, read-only; None when there is no such file (a node that never
    voted). The node's FileMetaStorage and `rmqctl` both read it through here."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return decode_hard_state(data, os.fspath(path))


class FileMetaStorage:
    """MetaStorage in `<directory>/raft_meta`: every save is fsynced, unconditionally (JRaft #1241)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = ensure_dir(directory)
        self.path = self.directory / META_FILE

    def load(self) -> HardState:
        return read_hard_state(self.path) or HardState()

    def save(self, hs: HardState) -> None:
        failpoint.hit("meta.save")
        atomic_write(self.directory, META_FILE, encode_hard_state(hs))

    def close(self) -> None:
        pass
