"""The audit log: one line per state-changing admin request a front end accepted (passed its authentication),
whatever its outcome (docs/security.md, "Audit log"). `rmqctl audit FILE` reads it.

The file is JSON Lines, UTF-8, appended (O_APPEND) and fsync'd after every record, so an answered request's
record survives a crash; created 0600, its directory fsync'd on creation. A record is one JSON object:

    {"ts": 1764262800123, "frontEnd": "remoting", "who": "ops", "from": "10.0.0.5:53210",
     "request": "CONTROLLER_CLEAN_BROKER_DATA", "code": 0, "remark": null, "fields": {...}}

`who`: the remoting AccessKey, else the TLS client certificate's subject CN (`cn:<name>`), else `anonymous`;
over HTTP `admin-token` (a valid bearer token was given) or `anonymous` (no token is configured). `fields`: the
request's extFields (remoting; AccessKey and Signature left out) or its JSON body and path (HTTP). `code`: the
RocketMQ code answered (HTTP: the envelope's code, else the HTTP status); `remark` its remark.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping

from raft.leaf.durable import ensure_dir, fsync_dir

log = logging.getLogger("controllerd.audit")

OMITTED = frozenset({"AccessKey", "Signature", "SecurityToken"})  # never written: they identify or authenticate
MAX_FIELD_CHARS = 1024  # longer values are cut (a record stays one short line)


class AuditLog:
    """One append-only file; `open(path)` shares one per path between the front ends of a process."""

    _open: dict[str, AuditLog] = {}
    _lock = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        directory = ensure_dir(os.path.dirname(os.path.abspath(path)))
        created = not os.path.exists(path)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if created:
            os.fsync(self.fd)
            fsync_dir(directory)

    @classmethod
    def open(cls, path: str) -> AuditLog:
        with cls._lock:
            log_ = cls._open.get(path)
            if log_ is None:
                log_ = cls._open[path] = cls(path)
            return log_

    def record(
        self,
        front_end: str,
        who: str,
        peer: str,
        request: str,
        fields: Mapping[str, object],
        code: int,
        remark: str | None,
    ) -> None:
        entry = {
            "ts": int(time.time() * 1000),
            "frontEnd": front_end,
            "who": who,
            "from": peer,
            "request": request,
            "code": code,
            "remark": remark,
            "fields": {k: _short(v) for k, v in fields.items() if k not in OMITTED},
        }
        data = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        try:
            os.write(self.fd, data)  # one write: O_APPEND keeps concurrent records whole
            os.fsync(self.fd)
        except OSError as e:
            log.error("audit record not written to %s (%s): %s", self.path, e, data.decode().rstrip())


def _short(value: object) -> object:
    if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
        return value[:MAX_FIELD_CHARS] + f"...({len(value)} chars)"
    return value


class AuditFormatError(ValueError):
    def __init__(self, path: str, line: int, offset: int, reason: str) -> None:
        self.path, self.line, self.offset, self.reason = path, line, offset, reason
        super().__init__(f"{path}:{line} (byte offset {offset}): {reason}")


FIELDS = ("ts", "frontEnd", "who", "from", "request", "code", "remark", "fields")


def read(path: str) -> Iterator[dict[str, object]]:
    """The records of an audit log, in order; AuditFormatError naming line and byte offset of a bad one. A last
    line without its newline (a crash inside the write) is reported too, not skipped."""
    offset = 0
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                raise AuditFormatError(path, n, offset, "the last record is cut short (no newline)")
            try:
                entry = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                raise AuditFormatError(path, n, offset, f"not a JSON object: {e}") from None
            if not isinstance(entry, dict) or set(entry) != set(FIELDS):
                raise AuditFormatError(path, n, offset, f"a record has exactly the fields {', '.join(FIELDS)}")
            yield entry
            offset += len(raw)
