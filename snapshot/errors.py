"""Errors of the snapshot subsystem. Damage is always a `SnapshotFormatError` that says where it is."""

from __future__ import annotations

import os


class SnapshotError(Exception):
    """Base class of every error raised by the `snapshot` package."""


class SnapshotFormatError(SnapshotError):
    """A snapshot file (data or meta) cannot be trusted: bad magic, version, CRC, length, layout...

    The message is `"<path>: [section <type> (<name>) ]at byte offset <n>: <reason>"`, and the same parts
    are attributes, so tools can point at the damaged byte. `offset` is the file offset where the
    problem was found (for a whole-section CRC: the section's first byte).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        offset: int,
        reason: str,
        *,
        section: int | None = None,
        section_name: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.offset = offset
        self.reason = reason
        self.section = section
        self.section_name = section_name
        super().__init__(f"{self.path}: {self.where()}: {reason}")

    def where(self) -> str:
        if self.section is None:
            return f"at byte offset {self.offset}"
        name = f" ({self.section_name})" if self.section_name else ""
        return f"section {self.section}{name} at byte offset {self.offset}"

    def __reduce__(self) -> tuple[object, ...]:  # keep the attributes across pickling (process pools, Spark)
        return (_rebuild_format_error, (self.path, self.offset, self.reason, self.section, self.section_name))


def _rebuild_format_error(
    path: str, offset: int, reason: str, section: int | None, section_name: str | None
) -> SnapshotFormatError:
    return SnapshotFormatError(path, offset, reason, section=section, section_name=section_name)


class SnapshotNotFoundError(SnapshotError):
    """No committed snapshot with that index in the storage."""


class SnapshotExistsError(SnapshotError):
    """A snapshot (or a pending one) with that index already exists; snapshots are never overwritten."""
