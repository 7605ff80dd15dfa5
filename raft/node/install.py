"""InstallSnapshot: the leader serves snapshot files in chunks, a lagging follower pulls them.

The core only decides *that* a follower needs a snapshot (it emits SNAP carrying the SnapshotMeta) and
*when* one is installed (a stepped SNAP makes it reset its log). The bytes move here, pull-style as in
sofa-jraft's CopySession: the follower asks for `__raft_snapshot_meta`, then for each file the meta lists,
in chunks of `chunk_bytes` with `window` requests in flight. Only when every file is on disk, fsynced and
matches the meta's size and CRC32C does the follower's node step the SNAP into its core.

Wire (frames of kind KIND_SNAPSHOT, authenticated like every raft frame; docs/wire-format.md):

    GET  [1, req_id, term, index, snap_term, name, offset, length]
    DATA [2, req_id, term, index, name, offset, data, crc32c(data), file_size]
    ERR  [3, req_id, term, index, reason]

Resumption: the download lives in `<download root>/install_<index>_<snap_term>/` next to a `.progress`
checkpoint (the file being fetched, the offset and the running CRC up to that offset) written after an
fsync every `sync_every_bytes`. A restarted follower, offered the same snapshot again (byte-identical
meta), truncates the file to the checkpoint and continues; a restarted leader serves the same files from
its snapshot storage. Supersession: an offer with a newer leader term or a newer snapshot index cancels
the running download; an older or duplicate offer is ignored.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from google_crc32c import value as crc32c

from raft.options import SnapshotOptions
from raft.status import RaftBaseError
from snapshot.errors import SnapshotNotFoundError
from snapshot.format import META_FILE, check_file_name
from snapshot.protocols import SnapshotStorage

log = logging.getLogger("raft.install")

GET, DATA, ERR = 1, 2, 3
MAX_CHUNK = 16 * 1024 * 1024  # largest chunk a leader serves, whatever a follower asks
PROGRESS_FILE = ".progress"

SendFrame = Callable[[str, tuple[object, ...]], bool]
# (payload, header) of a frame built off the event loop (TcpTransport.prepare_snapshot_frame), and the sender
# that takes it (TcpTransport.send_snapshot_frame with `prepared`).
PrepareFrame = Callable[[tuple[object, ...]], tuple[bytes, bytes]]
SendPrepared = Callable[[str, tuple[object, ...], tuple[bytes, bytes]], bool]


class DownloadError(RaftBaseError):
    pass


# --- leader side (the follower side: raft/node/download.py) ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Transfer:
    index: int
    last_activity: float
    bytes_sent: int = 0


class SnapshotServer:
    """Serves chunks of this node's committed snapshots and protects the ones being sent from retention."""

    def __init__(
        self,
        storage: SnapshotStorage,
        send: SendFrame,
        options: SnapshotOptions,
        prepare: PrepareFrame | None = None,
        send_prepared: SendPrepared | None = None,
    ) -> None:
        """With `prepare` and `send_prepared`, a chunk answer is read, CRC'd, encoded and tagged on the serving
        threads, and the event loop only queues its bytes (InstallSnapshot of 100 MiB is 100 such frames)."""
        self.storage = storage
        self._send = send
        self._prepare = prepare
        self._send_prepared = send_prepared if prepare is not None else None
        self.options = options
        self.transfers: dict[str, _Transfer] = {}
        self._io = ThreadPoolExecutor(max_workers=2, thread_name_prefix="snapshot-serve")
        self._throttle_at = 0.0  # loop time at which the throttle has room again
        self.bytes_served = 0

    def begin(self, peer: str, index: int, now: float) -> bool:
        """The core sent SNAP(index) to peer: pin the snapshot. False if it no longer exists."""
        cur = self.transfers.get(peer)
        if cur is not None and cur.index == index:
            cur.last_activity = now
            return True
        self.end(peer)
        try:
            self.storage.ref(index)
        except SnapshotNotFoundError:
            return False
        self.transfers[peer] = _Transfer(index, now)
        log.info("sending snapshot %d to %s", index, peer)
        return True

    def end(self, peer: str) -> None:
        t = self.transfers.pop(peer, None)
        if t is not None:
            self.storage.unref(t.index)

    def end_all(self) -> None:
        for peer in list(self.transfers):
            self.end(peer)

    def idle(self, now: float) -> list[str]:
        """Peers whose transfer saw no request for idle_timeout_s."""
        limit = self.options.idle_timeout_s
        return [p for p, t in self.transfers.items() if now - t.last_activity > limit]

    def handle_get(self, peer: str, body: tuple[object, ...], loop: asyncio.AbstractEventLoop, now: float) -> None:
        """Answer a GET on `loop`'s executor; `now` is the node's clock (the transfer's idle timer)."""
        if len(body) != 8:
            return
        _, req_id, term, index, _snap_term, name, offset, length = body
        if not (
            type(req_id) is int
            and type(term) is int
            and type(index) is int
            and type(offset) is int
            and type(length) is int
            and type(name) is str
        ):
            return
        t = self.transfers.get(peer)
        if t is not None and t.index == index:
            t.last_activity = now
        bad = None if name == META_FILE else check_file_name(name)
        if bad or offset < 0 or length <= 0:
            self._send(peer, (ERR, req_id, term, index, bad or f"bad range offset={offset} length={length}"))
            return
        length = min(length, MAX_CHUNK, self.options.chunk_bytes * 4)
        path = self.storage.path(index) / name
        fut = loop.run_in_executor(self._io, self._answer, req_id, term, index, name, offset, path, length)
        fut.add_done_callback(lambda f: self._reply(peer, req_id, term, index, name, f, loop))

    def _answer(
        self, req_id: int, term: int, index: int, name: str, offset: int, path: Path, length: int
    ) -> tuple[tuple[object, ...], tuple[bytes, bytes] | None]:
        """On a serving thread: the DATA answer, and its frame already encoded and tagged when we can."""
        data, size = _read_chunk(self.storage, index, path, offset, length)
        body: tuple[object, ...] = (DATA, req_id, term, index, name, offset, data, crc32c(data), size)
        return body, (self._prepare(body) if self._prepare is not None else None)

    def _reply(
        self,
        peer: str,
        req_id: int,
        term: int,
        index: int,
        name: str,
        f: asyncio.Future[tuple[tuple[object, ...], tuple[bytes, bytes] | None]],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        exc = f.exception()
        if exc is not None:
            self._send(peer, (ERR, req_id, term, index, f"cannot read {name}: {exc}"))
            return
        body, prepared = f.result()
        data = body[6]
        assert isinstance(data, bytes)
        rate = self.options.throttle_bytes_per_s
        if rate:
            now = loop.time()
            start = max(now, self._throttle_at)
            self._throttle_at = start + len(data) / rate
            if start > now:
                loop.call_at(start, self._send_data, peer, body, prepared)
                return
        self._send_data(peer, body, prepared)

    def _send_data(self, peer: str, frame: tuple[object, ...], prepared: tuple[bytes, bytes] | None = None) -> None:
        data = frame[6]
        assert isinstance(data, bytes)
        sent = (
            self._send_prepared(peer, frame, prepared)
            if prepared is not None and self._send_prepared is not None
            else self._send(peer, frame)
        )
        if sent:
            self.bytes_served += len(data)
            t = self.transfers.get(peer)
            if t is not None:
                t.bytes_sent += len(data)

    def close(self) -> None:
        self.end_all()
        self._io.shutdown(wait=True)


def _read_chunk(storage: SnapshotStorage, index: int, path: Path, offset: int, length: int) -> tuple[bytes, int]:
    with storage.reference(index):
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            return os.pread(fd, min(length, max(0, size - offset)), offset), size
        finally:
            os.close(fd)
