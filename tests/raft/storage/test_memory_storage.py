"""The LogStorage contract, run against MemoryLogStorage and SegmentLog alike so the simulation's log
behaves exactly like the real one (same indexes, same errors)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from raft.core.messages import Entry
from raft.options import LogStorageOptions
from raft.storage import MemoryLogStorage, SegmentLog
from tests.raft.helpers import ents

Store = MemoryLogStorage | SegmentLog


def pairs(es: list[Entry]) -> list[tuple[int, int, bytes]]:
    return [(e.term, e.index, e.data) for e in es]


@pytest.fixture(params=["memory", "segment"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    opened: list[Store] = []

    def factory() -> Store:
        store: Store = (
            MemoryLogStorage()
            if request.param == "memory"
            else SegmentLog(tmp_path / "log", LogStorageOptions(segment_bytes=150))
        )
        opened.append(store)
        return store

    yield factory
    for s in opened:
        s.close()


def test_empty(make: Callable[[], Store]) -> None:
    log = make()
    assert (log.first_index(), log.last_index()) == (1, 0)
    assert log.entries(1, 1) == []
    with pytest.raises(IndexError):
        log.entries(1, 2)
    with pytest.raises(ValueError, match="lo > hi"):
        log.entries(2, 1)


def test_append_read_truncate(make: Callable[[], Store]) -> None:
    log = make()
    log.append(ents(1, 10))
    log.append(ents(6, 8, term=2))
    assert pairs(log.entries(1, 9)) == pairs(ents(1, 5) + ents(6, 8, term=2))
    assert log.term(5) == 1 and log.term(8) == 2
    with pytest.raises(IndexError):
        log.term(9)
    log.truncate_prefix(4)
    assert (log.first_index(), log.last_index()) == (4, 8)
    with pytest.raises(IndexError):
        log.entries(3, 5)
    log.truncate_prefix(100)
    assert (log.first_index(), log.last_index()) == (100, 99)
    log.append(ents(100, 101, term=3))
    assert pairs(log.entries(100, 102)) == pairs(ents(100, 101, term=3))
    log.reset(7)
    assert (log.first_index(), log.last_index()) == (7, 6)


def test_same_errors(make: Callable[[], Store]) -> None:
    log = make()
    log.append(ents(1, 3))
    with pytest.raises(ValueError, match="gap after the last index 3"):
        log.append(ents(5, 5))
    with pytest.raises(ValueError, match="not contiguous"):
        log.append([*ents(4, 4), *ents(4, 4)])
    log.truncate_prefix(2)
    with pytest.raises(ValueError, match="below the first index 2"):
        log.append(ents(1, 1))
    with pytest.raises(ValueError, match="indexes start at 1"):
        log.reset(0)
    assert pairs(log.entries(2, 4)) == pairs(ents(2, 3))


def test_memory_log_custom_first_index() -> None:
    log = MemoryLogStorage(first_index=50)
    assert (log.first_index(), log.last_index()) == (50, 49)
    log.append(ents(50, 51))
    assert log.appends == 1
    with pytest.raises(ValueError):
        MemoryLogStorage(first_index=0)
