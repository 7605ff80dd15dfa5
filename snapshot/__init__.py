"""The snapshot subsystem: sectioned CRC-checked data files, SnapshotWriter/SnapshotReader, and the
snapshot directories (temp dir, fsync, atomic rename, retention, quarantine). Imports nothing of ours.

Formats: docs/snapshot-format.md.
"""

from snapshot.errors import SnapshotError, SnapshotExistsError, SnapshotFormatError, SnapshotNotFoundError
from snapshot.format import (
    CODEC_LZ4,
    CODEC_RAW,
    FORMAT_VERSION,
    META_FILE,
    META_VERSION,
    FileMeta,
    SectionEntry,
    SnapshotMeta,
    decode_file,
    encode_file,
)
from snapshot.rw import (
    SnapshotAbleMetadataManager,
    SnapshotReader,
    SnapshotWriter,
    WrittenFile,
    load_managers,
    save_managers,
)
from snapshot.storage import (
    DATA_FILE,
    FileSnapshotStorage,
    LoadResult,
    PendingSnapshot,
    Quarantined,
    StoredSnapshot,
)

__all__ = [
    "CODEC_LZ4",
    "CODEC_RAW",
    "DATA_FILE",
    "FORMAT_VERSION",
    "META_FILE",
    "META_VERSION",
    "FileMeta",
    "LoadResult",
    "PendingSnapshot",
    "Quarantined",
    "SectionEntry",
    "SnapshotAbleMetadataManager",
    "SnapshotError",
    "SnapshotExistsError",
    "SnapshotFormatError",
    "SnapshotMeta",
    "SnapshotNotFoundError",
    "SnapshotReader",
    "FileSnapshotStorage",
    "SnapshotWriter",
    "StoredSnapshot",
    "WrittenFile",
    "decode_file",
    "encode_file",
    "load_managers",
    "save_managers",
]
