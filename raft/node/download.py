"""InstallSnapshot, the follower side: pull a leader's snapshot files in chunks, resumably, into the
snapshot storage (the wire and the resumption rules: raft/node/install.py)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import shutil
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import msgpack
from google_crc32c import extend as crc32c_extend
from google_crc32c import value as crc32c

from raft.core.messages import Message
from raft.leaf import failpoint
from raft.leaf.durable import atomic_write, ensure_dir, fsync_dir
from raft.node.install import DATA, ERR, GET, PROGRESS_FILE, DownloadError, SendFrame
from raft.options import SnapshotOptions
from snapshot.format import META_FILE, decode_meta
from snapshot.protocols import SnapshotStorage

log = logging.getLogger("raft.install")


# --- follower side ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Offer:
    leader: str
    term: int  # the leader's term
    index: int
    snap_term: int

    @classmethod
    def of(cls, m: Message) -> Offer:
        assert m.snapshot is not None
        return cls(m.frm, m.term, m.snapshot.index, m.snapshot.term)

    def dirname(self) -> str:
        return f"install_{self.index:020d}_{self.snap_term}"


OnDone = Callable[[Message, Path], None]


class SnapshotDownloader:
    """Follower side: at most one download at a time, resumable across restarts."""

    def __init__(
        self, root: str | os.PathLike[str], storage: SnapshotStorage, send: SendFrame, options: SnapshotOptions
    ) -> None:
        self.root = ensure_dir(root)
        self.storage = storage
        self._send = send
        self.options = options
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[tuple[object, ...]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._offer: Offer | None = None
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-download")
        self.completed = 0
        self.failed = 0
        self.bytes_received = 0
        self.resumed_bytes = 0

    @property
    def active(self) -> Offer | None:
        return self._offer if self._task is not None and not self._task.done() else None

    def offer(self, m: Message, on_done: OnDone) -> None:
        """The leader sent SNAP: start (or keep) downloading it, unless an equal or newer one runs."""
        new = Offer.of(m)
        cur = self.active
        if cur is not None:
            if (new.term, new.index) <= (cur.term, cur.index):
                return  # a duplicate, or older than what we are fetching
            log.info("snapshot download %s superseded by %s", cur, new)
            assert self._task is not None
            self._task.cancel()
        self._offer = new
        self._task = asyncio.get_running_loop().create_task(self._run(m, new, on_done), name=f"download-{new.index}")

    def on_response(self, sender: str, body: tuple[object, ...]) -> None:
        if len(body) < 2 or type(body[1]) is not int:
            return
        fut = self._waiting.pop(body[1], None)
        if fut is not None and not fut.done() and self._offer is not None and sender == self._offer.leader:
            fut.set_result(body)

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._io.shutdown(wait=True)

    # --- the download ---------------------------------------------------------------------------------

    async def _run(self, m: Message, offer: Offer, on_done: OnDone) -> None:
        loop = asyncio.get_running_loop()
        try:
            path = await self._download(offer, loop)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure ends this attempt; the leader offers again
            self.failed += 1
            log.warning("snapshot download %d from %s failed: %s", offer.index, offer.leader, e)
            return
        self.completed += 1
        on_done(m, path)

    async def _download(self, offer: Offer, loop: asyncio.AbstractEventLoop) -> Path:
        target = self.root / offer.dirname()
        for p in self.root.iterdir():  # superseded downloads
            if p != target:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
        meta_bytes = await self._fetch_small(offer, META_FILE)
        meta = decode_meta(meta_bytes, f"{offer.leader}:{offer.dirname()}/{META_FILE}")
        if (meta.last_included_index, meta.last_included_term) != (offer.index, offer.snap_term):
            raise DownloadError(
                f"leader's meta is for ({meta.last_included_index}, {meta.last_included_term}), "
                f"offered ({offer.index}, {offer.snap_term})"
            )
        await loop.run_in_executor(self._io, _prepare, target, meta_bytes)
        done, current = await loop.run_in_executor(self._io, _read_progress, target)
        for f in meta.files:
            if f.name in done:
                continue
            start = current if current is not None and current[0] == f.name else None
            await self._fetch_file(offer, f.name, f.size, f.crc32c, target, start, loop)
            done.add(f.name)
            await loop.run_in_executor(self._io, _write_progress, target, done, None)
        await loop.run_in_executor(self._io, _finish, target)
        failpoint.hit("install.before_adopt")
        # Every file was checked against the meta's CRC as it was written (a resumed file continues the
        # CRC from its checkpoint, taken after an fsync), so adopting needs no second read.
        await loop.run_in_executor(self._io, functools.partial(self.storage.adopt, target, verify=False))
        failpoint.hit("install.after_adopt")
        return self.storage.path(offer.index)

    async def _request(self, offer: Offer, name: str, offset: int, length: int) -> asyncio.Future[tuple[object, ...]]:
        req_id = next(self._ids)
        fut: asyncio.Future[tuple[object, ...]] = asyncio.get_running_loop().create_future()
        self._waiting[req_id] = fut
        self._send(offer.leader, (GET, req_id, offer.term, offer.index, offer.snap_term, name, offset, length))
        return fut

    async def _await(
        self, fut: asyncio.Future[tuple[object, ...]], name: str, offset: int, check_crc: bool = True
    ) -> tuple[bytes, int]:
        """The chunk `name`@`offset` of a DATA answer and the file's size; `check_crc=False` leaves the chunk's
        CRC to the caller (it is checked on the download thread, off the event loop, by _write_chunk)."""
        data, size, _ = await self._await_crc(fut, name, offset, check_crc)
        return data, size

    async def _await_crc(
        self, fut: asyncio.Future[tuple[object, ...]], name: str, offset: int, check_crc: bool
    ) -> tuple[bytes, int, int]:
        try:
            body = await asyncio.wait_for(fut, self.options.request_timeout_s)
        except TimeoutError:
            raise DownloadError(
                f"no answer for {name} at offset {offset} in {self.options.request_timeout_s} s"
            ) from None
        if body[0] == ERR:
            raise DownloadError(f"leader refused {name} at offset {offset}: {body[4] if len(body) > 4 else '?'}")
        if body[0] != DATA or len(body) != 9:
            raise DownloadError(f"malformed answer for {name} at offset {offset}")
        _, _, _, _, rname, roffset, data, crc, size = body
        if (
            rname != name
            or roffset != offset
            or type(data) is not bytes
            or type(size) is not int
            or type(crc) is not int
        ):
            raise DownloadError(f"answer for {rname}@{roffset} does not match the request {name}@{offset}")
        if check_crc and crc32c(data) != crc:
            raise DownloadError(f"chunk {name} [{offset}, {offset + len(data)}): CRC mismatch")
        self.bytes_received += len(data)
        return data, size, crc

    async def _fetch_small(self, offer: Offer, name: str) -> bytes:
        parts: list[bytes] = []
        offset = 0
        while True:
            data, size = await self._await(
                await self._request(offer, name, offset, self.options.chunk_bytes), name, offset
            )
            parts.append(data)
            offset += len(data)
            if offset >= size or not data:
                return b"".join(parts)

    async def _fetch_file(
        self,
        offer: Offer,
        name: str,
        size: int,
        want_crc: int,
        target: Path,
        start: tuple[str, int, int] | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        offset, crc = (start[1], start[2]) if start is not None else (0, 0)
        offset = min(offset, size)
        if offset:
            self.resumed_bytes += offset
            log.info("resuming snapshot %d file %s at byte %d of %d", offer.index, name, offset, size)
        fd = await loop.run_in_executor(self._io, _open_at, target / name, offset)
        inflight: deque[tuple[int, int, asyncio.Future[tuple[object, ...]]]] = deque()
        try:
            chunk = self.options.chunk_bytes
            next_off = synced_at = offset
            while offset < size:
                while len(inflight) < self.options.window and next_off < size:
                    n = min(chunk, size - next_off)
                    inflight.append((next_off, n, await self._request(offer, name, next_off, n)))
                    next_off += n
                at, n, fut = inflight.popleft()
                data, _, chunk_crc = await self._await_crc(fut, name, at, check_crc=False)
                if len(data) != n:
                    raise DownloadError(f"{name}: {len(data)} bytes at offset {at}, asked for {n} (file changed?)")
                crc = await loop.run_in_executor(self._io, _write_chunk, fd, data, at, chunk_crc, crc, name)
                failpoint.hit("install.chunk")
                offset = at + n
                if offset - synced_at >= self.options.sync_every_bytes and offset < size:
                    await loop.run_in_executor(self._io, _checkpoint, fd, target, name, offset, crc)
                    synced_at = offset
            if crc != want_crc:
                await loop.run_in_executor(self._io, _restart_file, target, name)
                raise DownloadError(f"{name}: CRC {crc:#010x} over {size} bytes, the meta says {want_crc:#010x}")
            await loop.run_in_executor(self._io, os.fsync, fd)
        finally:
            for _, _, fut in inflight:
                fut.cancel()
            await loop.run_in_executor(self._io, os.close, fd)


# --- file helpers (on the download thread) -------------------------------------------------------------


def _write_chunk(fd: int, data: bytes, at: int, chunk_crc: int, crc: int, name: str) -> int:
    """Check a received chunk against its CRC, write it at `at`; the file's running CRC extended by it."""
    if crc32c(data) != chunk_crc:
        raise DownloadError(f"chunk {name} [{at}, {at + len(data)}): CRC mismatch")
    os.pwrite(fd, data, at)
    return crc32c_extend(crc, data)


def _prepare(target: Path, meta_bytes: bytes) -> None:
    """Start or resume: keep the directory only if it holds the very same snapshot (same meta bytes)."""
    meta_path = target / META_FILE
    if target.is_dir():
        try:
            same = meta_path.read_bytes() == meta_bytes
        except FileNotFoundError:
            same = False
        if same:
            return
        shutil.rmtree(target)
    target.mkdir(parents=True)
    atomic_write(target, META_FILE, meta_bytes)
    fsync_dir(target.parent)


def _read_progress(target: Path) -> tuple[set[str], tuple[str, int, int] | None]:
    try:
        done, current = msgpack.unpackb((target / PROGRESS_FILE).read_bytes())
        names = {str(n) for n in done}
        cur = None if current is None else (str(current[0]), int(current[1]), int(current[2]))
        return names, cur
    except FileNotFoundError:
        return set(), None
    except (ValueError, TypeError, IndexError) as e:  # a damaged checkpoint only costs a re-download
        log.warning("%s: unreadable download checkpoint (%s); starting over", target, e)
        for p in target.iterdir():
            if p.name != META_FILE:
                p.unlink()
        return set(), None


def _write_progress(target: Path, done: set[str], current: tuple[str, int, int] | None) -> None:
    atomic_write(target, PROGRESS_FILE, msgpack.packb([sorted(done), current]))


def _open_at(path: Path, offset: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, offset)  # drop anything past the checkpoint: it was never verified
    return fd


def _checkpoint(fd: int, target: Path, name: str, offset: int, crc: int) -> None:
    os.fsync(fd)
    done, _ = _read_progress(target)
    _write_progress(target, done, (name, offset, crc))


def _restart_file(target: Path, name: str) -> None:
    done, _ = _read_progress(target)
    (target / name).unlink(missing_ok=True)
    _write_progress(target, done, None)


def _finish(target: Path) -> None:
    (target / PROGRESS_FILE).unlink(missing_ok=True)
    fsync_dir(target)
