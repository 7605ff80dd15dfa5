"""Helpers shared by the raft node, WAL and daemon service tests (imported, like tests/cli/helpers.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack

from raft.core.messages import Entry
from raft.options import RaftOptions
from raft.storage.protocols import LogStorage

FAST = RaftOptions(election_timeout_ms=300)  # real sockets on loopback: elections in a fraction of a second


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Until `condition()` holds: a bounded poll (1 ms) of a counter or state another task or thread changes,
    TimeoutError after `timeout` seconds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


def run(coro: Callable[[], Awaitable[Any]], timeout_s: float = 60) -> Any:
    """Run one async test body to completion, failing it after `timeout_s`."""
    return asyncio.run(asyncio.wait_for(coro(), timeout_s))


def put(k: str, v: Any) -> bytes:
    """A KvStateMachine write command."""
    return msgpack.packb([k, v])


def ents(lo: int, hi: int, term: int = 1) -> list[Entry]:
    """Entries lo..hi inclusive whose data names them ("term/index")."""
    return [Entry(term, i, 0, f"{term}/{i}".encode()) for i in range(lo, hi + 1)]


def dump(log: LogStorage) -> list[tuple[int, int, int, bytes]]:
    """Every entry the log holds, as (term, index, type, data)."""
    return [(e.term, e.index, e.type, e.data) for e in log.entries(log.first_index(), log.last_index() + 1)]


def expect(es: list[Entry]) -> list[tuple[int, int, int, bytes]]:
    """What `dump` shows for a log holding exactly `es`."""
    return [(e.term, e.index, e.type, e.data) for e in es]
