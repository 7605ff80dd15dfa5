"""The FSYNCED sidecar names the durable end of the active segment after every fsynced append."""

from __future__ import annotations

import os
from typing import Any

from raft.core.messages import Entry
from raft.options import LogStorageOptions
from raft.storage.wal import FSYNCED_FILE, SegmentLog
from raft.storage.walscan import scan_directory


def read_sidecar(d: str) -> tuple[str, int]:
    with open(os.path.join(d, FSYNCED_FILE)) as f:
        line = f.read()
    assert len(line) == 80 and line.endswith("\n")
    name, offset = line.split()
    return name, int(offset)


def test_sidecar_tracks_the_durable_offset_across_segments(tmp_path: Any) -> None:
    d = str(tmp_path / "log")
    log = SegmentLog(d, LogStorageOptions(segment_bytes=300, fsync_sidecar=True))
    for i in range(1, 30):
        log.append([Entry(1, i, data=b"x" * 40)])
        name, offset = read_sidecar(d)
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        # exactly the bytes written and fsynced; after them, only the zeros of the preallocated file
        assert scan_directory(d).scans[-1].valid_end == offset and data[offset:] == bytes(len(data) - offset)
    segments = sorted(n for n in os.listdir(d) if n.endswith(".wal"))
    assert len(segments) > 1 and name == segments[-1]
    log.close()
    # Cutting the segment back to the sidecar's offset loses nothing that was acknowledged.
    with open(os.path.join(d, name), "r+b") as f:
        f.truncate(offset)
    reopened = SegmentLog(d, LogStorageOptions(segment_bytes=300))
    assert reopened.last_index() == 29
    reopened.close()


def test_no_sidecar_by_default(tmp_path: Any) -> None:
    d = str(tmp_path / "log")
    log = SegmentLog(d)
    log.append([Entry(term=1, index=1, data=b"x")])
    log.close()
    assert not os.path.exists(os.path.join(d, FSYNCED_FILE))
