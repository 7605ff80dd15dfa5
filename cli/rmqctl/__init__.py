"""`rmqctl`: the operator's command line for the jRaft controller.

Offline verbs (no running node; `offline.py`, `logverbs.py`) work on a data directory:
`snapshot inspect|verify|diff`, `log info|dump|replay`. Online verbs register below the same way.

Every verb shares the output flags (`-o table|json|text`, `--no-color`, see output.py) and the exit codes,
which scripts can rely on (unlike mqadmin, which always exits 0):

    0 ok   1 failed, or a check found a problem   2 usage or config error
    3 unreachable, or no leader                  4 corrupt input (the message names file and byte offset)

Errors are handled in one place (`RmqctlGroup.invoke`): a verb raises an `RmqctlError` subclass, or lets a
storage error (snapshot/WAL/meta corruption, a locked data dir, a connection failure) escape, and the
user gets one line on stderr, `rmqctl: <kind>: <message>`, and the matching exit code.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import IO

import click

from cli.rmqctl.output import MODES, Out, color_allowed, default_mode

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_CORRUPT = 4
DEFAULT_TIMEOUT_S = 10.0  # the online verbs' overall deadline (--timeout, RMQCTL_TIMEOUT)


class RmqctlError(click.ClickException):
    """An error the user should see as one line. Click's standalone mode prints it via `show()` and exits
    with `exit_code`; `lines` are extra one-line reports printed before it (e.g. one per corrupt file)."""

    exit_code = EXIT_FAILED
    kind = "error"

    def __init__(
        self, message: str, *, lines: list[str] | None = None, code: int | None = None, code_name: str | None = None
    ) -> None:
        super().__init__(" ".join(message.split("\n")))  # one line, always
        self.lines = [" ".join(x.split("\n")) for x in lines or []]
        # The RocketMQ response code that names the failure, when there is one: what a controller answered, or
        # the code rmqctl judges fits an answer it fails on although it said SUCCESS (see Out.flush_json).
        self.code = code
        self.code_name = code_name

    def show(self, file: IO[str] | None = None) -> None:
        for line in [*self.lines, self.message]:
            click.echo(f"rmqctl: {self.kind}: {line}", err=True)


class Failed(RmqctlError):
    """The operation failed, or a check found a problem (exit 1)."""


class BadUsage(RmqctlError):
    """The invocation cannot work as given: bad arguments, a locked data dir without --copy (exit 2)."""

    exit_code = EXIT_USAGE
    kind = "usage error"


class Unreachable(RmqctlError):
    """No node answered, or there is no leader (exit 3)."""

    exit_code = EXIT_UNREACHABLE
    kind = "unreachable"


class CorruptInput(RmqctlError):
    """A file fails its checks (exit 4). `path` and `offset` say where; the message always names both."""

    exit_code = EXIT_CORRUPT
    kind = "corrupt input"

    def __init__(
        self, path: str, offset: int, reason: str, *, where: str | None = None, lines: list[str] | None = None
    ) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(f"{path}: {where or f'at byte offset {offset}'}: {reason}", lines=lines)

    @classmethod
    def of(cls, error: BaseException, show_path: Callable[[str], str] | None = None) -> CorruptInput:
        """From a SnapshotFormatError / LogCorruptionError / MetaCorruptionError (each carries path, offset
        and reason); `show_path` maps a path read from a --copy back to the user's path."""
        path = str(getattr(error, "path", "?"))
        path = show_path(path) if show_path is not None else path
        where = getattr(error, "where", None)  # SnapshotFormatError: also names the damaged section
        return cls(
            path,
            int(getattr(error, "offset", 0)),
            str(getattr(error, "reason", error)),
            where=where() if callable(where) else None,
        )


def _translate(error: BaseException) -> RmqctlError | None:
    """The storage and network errors any verb may let escape, mapped to exit codes in this one place."""
    from cli.datadir import DataDirLockedError
    from raft.storage.meta import MetaCorruptionError
    from raft.storage.segment import LogCorruptionError
    from snapshot.errors import SnapshotError, SnapshotFormatError

    if isinstance(error, SnapshotFormatError | LogCorruptionError | MetaCorruptionError):
        return CorruptInput.of(error)
    if isinstance(error, SnapshotError):
        return Failed(str(error))
    if isinstance(error, DataDirLockedError):
        return BadUsage(f"{error}; stop it, or pass --copy to read a copy of the files")
    if isinstance(error, OSError):  # unreadable file, permission denied, disk error: the operation failed
        return Failed(f"{type(error).__name__}: {error}")
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx is a dependency; offline use does not need it
        return None
    if isinstance(error, httpx.TransportError):
        return Unreachable(f"{type(error).__name__}: {error}")
    return None


class RmqctlGroup(click.Group):
    """The top-level group: runs the verb and turns known exceptions into exit codes (see `_translate`)."""

    def invoke(self, ctx: click.Context) -> object:
        # -o json documents are held until the verb ends (Out.held), so that the JSON printed never says
        # SUCCESS when the exit code says otherwise: `failure` is what the verb ended with.
        failure: BaseException | None = None
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # `rmqctl log dump | head`: the reader left; that is not an error. Point stdout at /dev/null so
            # the interpreter's final flush does not raise again.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(EXIT_OK) from None
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort) as e:
            failure = e
            raise
        except Exception as e:
            failure = e
            mapped = _translate(e)
            if mapped is None:
                raise
            failure = mapped
            raise mapped from e
        finally:
            out = ctx.obj if isinstance(ctx.obj, Out) else None
            if out is not None:
                out.flush_json(failure)


@click.group(cls=RmqctlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-o",
    "--output",
    type=click.Choice(MODES),
    default=None,
    help="table (default on a TTY), json, or text (mqadmin's #Key<TAB>value lines; default when piped).",
)
@click.option("--no-color", is_flag=True, help="No colours (NO_COLOR in the environment does the same).")
@click.option(
    "-a",
    "--address",
    metavar="HOST:PORT[;...]",
    help="Controller HTTP address(es) for the online verbs (same as the verb's own -a, or RMQCTL_ADDRESS).",
)
@click.option("--token", metavar="TOKEN", help="Bearer token for the online verbs (same as RMQCTL_TOKEN).")
@click.option(
    "--cacert", metavar="FILE", help="PEM CA bundle that https:// controllers are checked against (RMQCTL_CACERT)."
)
@click.option(
    "--cert", metavar="FILE", help="PEM client certificate for https:// controllers that require one (RMQCTL_CERT)."
)
@click.option("--key", metavar="FILE", help="PEM private key of --cert, unless --cert holds it (RMQCTL_KEY).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help=f"Overall deadline of an online verb, retries and leader following included (default "
    f"{DEFAULT_TIMEOUT_S:g}; same as the verb's --timeout, or RMQCTL_TIMEOUT). A refused connection is not "
    "retried: when every address refuses, the verb exits 3 at once.",
)
@click.pass_context
def main(
    ctx: click.Context,
    output: str | None,
    no_color: bool,
    address: str | None,
    token: str | None,
    cacert: str | None,
    cert: str | None,
    key: str | None,
    timeout: float | None,
) -> None:
    """Operate a RocketMQ jRaft controller.

    \b
    Exit codes: 0 ok, 1 failed or a check found problems, 2 usage or config error,
    3 unreachable or no leader, 4 corrupt input (file and byte offset named on stderr).
    """
    # held=[]: json documents wait for the verb's outcome (RmqctlGroup.invoke flushes them).
    ctx.obj = Out(mode=output or default_mode(), color=color_allowed(no_color), held=[])  # type: ignore[arg-type]
    # `rmqctl -a X raft status` as well as mqadmin's `rmqctl raft status -a X`: the verb's options read these
    # variables as their defaults, and the verb is parsed after this callback runs.
    if address is not None:
        os.environ["RMQCTL_ADDRESS"] = address
    if token is not None:
        os.environ["RMQCTL_TOKEN"] = token
    if timeout is not None:
        os.environ["RMQCTL_TIMEOUT"] = repr(timeout)
    for variable, value in (("RMQCTL_CACERT", cacert), ("RMQCTL_CERT", cert), ("RMQCTL_KEY", key)):
        if value is not None:
            os.environ[variable] = value


# Verb modules, registered last because they import the names above. One import + add_command each.
from cli.rmqctl.offline import snapshot  # noqa: E402

main.add_command(snapshot)

from cli.rmqctl.logverbs import log  # noqa: E402

main.add_command(log)

from cli.rmqctl.online import register  # noqa: E402

register(main)

from cli.rmqctl.broker import broker  # noqa: E402

main.add_command(broker)

from cli.rmqctl.auditverb import audit  # noqa: E402

main.add_command(audit)

from cli.rmqctl.migrate import migrate  # noqa: E402

main.add_command(migrate)
