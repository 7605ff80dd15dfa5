"""Structured logs: every line carries the node id, its Raft role and term, and the Raft index.

`install(service, fmt)` configures the root logger for the daemon: JSON lines when stderr is not a TTY
(one object per line: ts, level, logger, msg, node_id, role, term, applied, plus `index` when the
record names one, e.g. `log.info(..., extra={"index": i})`), a readable line on a TTY. Embedders keep
their own handlers and add `NodeContextFilter(service)` to them to get the same fields.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from api.service import ControllerService
from statemachine.values import JSONObject

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "node_id", "role", "term", "applied"}


class NodeContextFilter(logging.Filter):
    """Stamps node_id, role, term and applied (the applied Raft index) onto every record."""

    def __init__(self, service: ControllerService) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        svc = self.service
        record.node_id = svc.id
        record.role, record.term, record.applied = svc.log_context()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: JSONObject = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "node_id": getattr(record, "node_id", None),
            "role": getattr(record, "role", None),
            "term": getattr(record, "term", None),
            "applied": getattr(record, "applied", None),
        }
        for k, v in vars(record).items():  # extra={...} fields, such as index
            if k not in _STANDARD and k not in out and not k.startswith("_") and k != "color_message":
                out[k] = v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, separators=(",", ":"))


class ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%H:%M:%S", time.localtime(record.created)) + f".{int(record.msecs):03d}"
        index = getattr(record, "index", None)
        where = f"{getattr(record, 'node_id', '-')} {getattr(record, 'role', '-')} t{getattr(record, 'term', '-')}"
        where += f" i{index if index is not None else getattr(record, 'applied', '-')}"
        line = f"{ts} {record.levelname:<7} [{where}] {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def install(service: ControllerService, fmt: str = "auto", level: str = "info") -> logging.Handler:
    """Route every logger (ours, uvicorn's, asyncio's) to stderr in `fmt` ("json", "console" or "auto":
    console on a TTY, JSON otherwise)."""
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else ConsoleFormatter())
    handler.addFilter(NodeContextFilter(service))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):  # uvicorn.access: ControllerServer decides (--access-log)
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True
    return handler
