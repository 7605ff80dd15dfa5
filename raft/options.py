"""Options dataclasses, one per component, each default documented where it is defined."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogStorageOptions:
    """Options of the segment WAL (raft.storage.wal.SegmentLog). Sizes in bytes."""

    segment_bytes: int = 64 * 1024 * 1024
    """A segment is sealed once it holds at least this many bytes; the next append starts a new file. A batch
    never spans two segments, so a segment can exceed this by up to one batch."""
    verify_reads: bool = True
    """CRC-check every record read back from disk (cheap next to the pread): corruption raises instead of
    returning bad data."""

    def __post_init__(self) -> None:
        if self.segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, got {self.segment_bytes}")


@dataclass(frozen=True, slots=True)
class TransportOptions:
    """Tuning of raft.transport (TcpTransport and InMemoryTransport). Sizes in bytes, times in seconds."""

    max_frame_bytes: int = 64 * 1024 * 1024
    """Largest frame accepted or sent. A bigger inbound frame closes the connection (decode failure); a single
    message that cannot fit is dropped by the sender. Must be the same on every node."""
    max_pending_bytes: int = 64 * 1024 * 1024
    """Cap on encoded messages waiting for one peer (connecting, or its socket is backed up). Messages beyond
    it are dropped and counted: Raft retransmits by itself, an unbounded queue would only hide a dead peer."""
    write_buffer_high_bytes: int = 4 * 1024 * 1024
    """Socket write buffer level above which we stop handing frames to the kernel for that peer (asyncio
    pause_writing); flushing resumes below a quarter of it. Keeps memory and latency bounded under a slow peer."""
    connect_timeout: float = 1.0
    """Give up a TCP connect after this long and back off."""
    backoff_min: float = 0.05
    """First reconnect delay after a failed connect or a lost connection; doubled per failure..."""
    backoff_max: float = 1.0
    """...up to this. While backing off, messages for the peer are dropped (counted)."""
