"""FileMetaStorage: term and vote survive reopen; any damage is a hard error naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from raft.core.messages import HardState
from raft.storage import FileMetaStorage, MemoryMetaStorage, MetaCorruptionError
from raft.storage.meta import META_FILE, decode_hard_state, encode_hard_state, read_hard_state


def test_missing_file_loads_the_zero_hard_state(tmp_path: Path) -> None:
    assert FileMetaStorage(tmp_path / "a" / "b").load() == HardState()
    assert (tmp_path / "a" / "b").is_dir()


@pytest.mark.parametrize("hs", [HardState(), HardState(1, "n1"), HardState(2**63, "nœud-é" * 50), HardState(7, "")])
def test_round_trip_across_reopen(tmp_path: Path, hs: HardState) -> None:
    FileMetaStorage(tmp_path).save(HardState(1, "old"))
    FileMetaStorage(tmp_path).save(hs)
    assert FileMetaStorage(tmp_path).load() == hs
    assert not (tmp_path / (META_FILE + ".tmp")).exists()


def test_leftover_temp_file_is_ignored(tmp_path: Path) -> None:
    meta = FileMetaStorage(tmp_path)
    meta.save(HardState(3, "n2"))
    (tmp_path / (META_FILE + ".tmp")).write_bytes(b"half-written garbage")  # a crash during the next save
    assert FileMetaStorage(tmp_path).load() == HardState(3, "n2")
    meta.save(HardState(4, "n3"))
    assert FileMetaStorage(tmp_path).load() == HardState(4, "n3")


def test_every_flipped_byte_is_detected(tmp_path: Path) -> None:
    meta = FileMetaStorage(tmp_path)
    meta.save(HardState(5, "node-1"))
    raw = (tmp_path / META_FILE).read_bytes()
    for pos in range(len(raw)):
        damaged = bytearray(raw)
        damaged[pos] ^= 0x01
        (tmp_path / META_FILE).write_bytes(bytes(damaged))
        with pytest.raises(MetaCorruptionError, match=str(tmp_path / META_FILE)):
            meta.load()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "too short"),
        (b"XXXX" + encode_hard_state(HardState(1, "a"))[4:], "bad magic"),
        (encode_hard_state(HardState(1, "a"))[:-1], "too short|length"),
        (encode_hard_state(HardState(1, "a")) + b"\0", "length"),
    ],
)
def test_corrupt_file_is_a_hard_error(tmp_path: Path, data: bytes, reason: str) -> None:
    (tmp_path / META_FILE).write_bytes(data)
    with pytest.raises(MetaCorruptionError, match=reason):
        FileMetaStorage(tmp_path).load()


def test_invalid_hard_states_are_refused(tmp_path: Path) -> None:
    meta = FileMetaStorage(tmp_path)
    with pytest.raises(ValueError):
        meta.save(HardState(1, "x" * 70000))
    with pytest.raises(ValueError):
        meta.save(HardState(-1, ""))


def test_memory_meta_storage() -> None:
    meta = MemoryMetaStorage()
    assert meta.load() == HardState()
    meta.save(HardState(2, "b"))
    assert meta.load() == HardState(2, "b") and meta.saves == 1


def test_every_meta_corruption_names_the_byte_offset(tmp_path):
    """The corruption sweep found raft_meta refusals naming the file but not where in it."""
    good = encode_hard_state(HardState(7, "n1"))
    for pos in range(len(good)):
        bad = bytearray(good)
        bad[pos] ^= 0x10
        with pytest.raises(MetaCorruptionError, match=r"raft_meta: at byte offset \d+: "):
            decode_hard_state(bytes(bad), "/s/meta/raft_meta")
    for cut in range(len(good)):
        with pytest.raises(MetaCorruptionError, match=r"at byte offset \d+: "):
            decode_hard_state(good[:cut], "/s/meta/raft_meta")


def test_the_error_carries_file_offset_and_reason_once(tmp_path: Path) -> None:
    """rmqctl prints MetaCorruptionError's fields (it once re-derived the offset and printed it twice)."""
    path = tmp_path / META_FILE
    path.write_bytes(b"XXXX" + encode_hard_state(HardState(1, "a"))[4:])
    with pytest.raises(MetaCorruptionError) as e:
        read_hard_state(path)
    assert (e.value.path, e.value.offset, e.value.reason) == (str(path), 0, "bad magic b'XXXX'")
    assert str(e.value) == f"{path}: at byte offset 0: bad magic b'XXXX'"
    assert read_hard_state(tmp_path / "absent") is None and FileMetaStorage(tmp_path / "d").load() == HardState()
