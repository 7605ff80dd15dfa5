"""`rmqctl audit FILE`: the audit log of a node (controllerAuditLog, default `<controllerStorePath>/audit.log`;
format in docs/security.md), one row per accepted state-changing admin request, oldest first."""

from __future__ import annotations

from collections.abc import Iterator

import click

from api.service.audit import AuditFormatError, read
from cli.rmqctl import CorruptInput
from cli.rmqctl.output import Out, emit_rows, iso_millis, output_options, pass_out

COLUMNS = ("time", "frontEnd", "who", "from", "request", "code", "remark", "fields")


@click.command("audit")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--who", help="Only the requests of this user (an AccessKey, cn:<name>, admin-token, anonymous).")
@output_options
@pass_out
def audit(out: Out, path: str, who: str | None) -> None:
    """Show the audit log FILE. A damaged record stops the listing with exit 4 naming line and byte offset."""

    def rows() -> Iterator[dict[str, object]]:
        for entry in read(path):
            if who is None or entry["who"] == who:
                ts = entry["ts"]
                yield {"time": iso_millis(ts) if isinstance(ts, int) else str(ts), **entry}

    try:
        emit_rows(out, rows(), COLUMNS, title=f"audit log {path}")
    except AuditFormatError as e:
        raise CorruptInput(e.path, e.offset, e.reason, where=f"line {e.line}, byte offset {e.offset}") from None
