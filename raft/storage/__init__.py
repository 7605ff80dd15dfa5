"""Durable (segment WAL, term/vote file) and in-memory implementations of the storage protocols."""

from raft.storage.memory import MemoryLogStorage, MemoryMetaStorage
from raft.storage.meta import FileMetaStorage, MetaCorruptionError
from raft.storage.protocols import LogStorage, MetaStorage
from raft.storage.segment import FORMAT_VERSION, LogCorruptionError
from raft.storage.wal import (
    LogStorageFailedError,
    LogWriter,
    LogWriterError,
    LogWriterStats,
    SegmentLog,
)

__all__ = [
    "FORMAT_VERSION",
    "FileMetaStorage",
    "LogCorruptionError",
    "LogStorage",
    "LogStorageFailedError",
    "LogWriter",
    "LogWriterError",
    "LogWriterStats",
    "MemoryLogStorage",
    "MemoryMetaStorage",
    "MetaCorruptionError",
    "MetaStorage",
    "SegmentLog",
]
