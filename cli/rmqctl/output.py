"""Rendering shared by every rmqctl verb: one document (key/value pairs plus row blocks) or one row list,
in three modes, so every verb looks and scripts the same way.

* `table`: Rich tables for humans (the default on a TTY).
* `json`: `json.dumps(..., sort_keys=True)` with raw integers (int64 ids stay exact) and ISO-8601
  timestamps; row streams (`log dump`) are NDJSON, one object per line, so `jq -c` and Spark read them.
* `text`: mqadmin's `#Key<TAB>value` lines (the default when piped). A list of scalars repeats its key,
  like mqadmin's `#Peer:` lines. A row block is `#Table<TAB>name`, a header of `#Column`s, then one
  tab-separated line per row, so `grep`, `cut -f` and `awk -F'\\t'` work on it.

Progress bars go to stderr only, and only when stderr is a terminal: stdout stays clean for pipes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Literal, TypeVar

import click
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from statemachine.codes import SUCCESS as SUCCESS_CODE
from statemachine.codes import SYSTEM_ERROR as SYSTEM_ERROR_CODE
from statemachine.codes import code_name
from statemachine.values import JSON, JSONObject

Mode = Literal["table", "json", "text"]
F = TypeVar("F", bound=Callable[..., object])  # a click command function
MODES: tuple[Mode, ...] = ("table", "json", "text")
UNWRAPPED_WIDTH = 10_000  # the console width off a terminal: nothing wraps


def default_mode() -> Mode:
    """Table for a human at a terminal, mqadmin text for a pipe or a file."""
    return "table" if sys.stdout.isatty() else "text"


def color_allowed(no_color_flag: bool = False) -> bool:
    """--no-color, or NO_COLOR set to anything non-empty (no-color.org), turns colour off."""
    return not no_color_flag and not os.environ.get("NO_COLOR")


@dataclass
class Out:
    """The context object every verb gets: how to render. Built by the top-level group from -o and
    --no-color; a leaf verb's own -o (see `output_options`) overrides it."""

    mode: Mode = field(default_factory=default_mode)
    color: bool = field(default_factory=color_allowed)
    held: list[JSONObject] | None = None
    """json documents not written yet (None: written at once). The top-level group holds them until the verb
    ended, then `flush_json` writes them, so that a document cannot contradict the exit code."""

    def flush_json(self, failure: BaseException | None = None) -> None:
        """Write the held json documents. When the verb failed (`failure` exits non-zero), a held RocketMQ
        envelope that says SUCCESS (code 0) takes the failure's code: the code and codeName the error carries
        (what a controller answered, or the code rmqctl chose, e.g. 2008 for a broker set the controller does
        not know), else 1 SYSTEM_ERROR, RocketMQ's generic failure; its remark is then rmqctl's message. Every
        other document is written as it is (per-node maps carry each node's own code)."""
        held, self.held = self.held or [], None
        exit_code = 0 if failure is None else getattr(failure, "exit_code", 1)
        code = getattr(failure, "code", None)
        if isinstance(code, int) and code != SUCCESS_CODE:
            name = getattr(failure, "code_name", None) or code_name(code)
        else:
            code, name = SYSTEM_ERROR_CODE, code_name(SYSTEM_ERROR_CODE)
        for doc in held:
            if exit_code and _is_success_envelope(doc):
                message = getattr(failure, "message", None) or str(failure)
                doc = {**doc, "code": code, "codeName": name, "remark": message}
            sys.stdout.write(_dumps(doc, indent=2) + "\n")

    def console(self, stderr: bool = False) -> Console:
        # file=None: Rich looks sys.stdout/sys.stderr up at write time (click's test runner swaps them).
        # Off a terminal (`-o table | less`, a file) Rich would wrap at 80 columns: there tables take the
        # width they need instead, unless COLUMNS says otherwise.
        stream = sys.stderr if stderr else sys.stdout
        width = None if stream.isatty() or os.environ.get("COLUMNS") else UNWRAPPED_WIDTH
        return Console(stderr=stderr, no_color=not self.color, highlight=False, emoji=False, width=width)


@dataclass
class Block:
    """Rows rendered as their own table; `key` is the JSON key and the `#Table` name in text mode."""

    key: str
    rows: list[JSONObject]
    columns: Sequence[str] | None = None
    title: str | None = None

    def column_names(self) -> list[str]:
        if self.columns is not None:
            return list(self.columns)
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.update(dict.fromkeys(row))
        return list(seen)


def output_options(f: F) -> F:
    """-o/--output and --no-color on a leaf verb as well, so `rmqctl snapshot inspect X -o json` works like
    `rmqctl -o json snapshot inspect X`. Both only change the shared Out object (see `pass_out`)."""

    def set_mode(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is not None:
            ctx.ensure_object(Out).mode = value  # type: ignore[assignment]  # click.Choice vouches for it

    def set_no_color(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(Out).color = False

    f = click.option(
        "--no-color",
        is_flag=True,
        expose_value=False,
        callback=set_no_color,
        help="No colours (NO_COLOR in the environment does the same).",
    )(f)
    return click.option(
        "-o",
        "--output",
        type=click.Choice(MODES),
        expose_value=False,
        callback=set_mode,
        help="table (default on a TTY), json, or text (#Key<TAB>value; default when piped).",
    )(f)


# The verbs' way to get the Out object; a verb invoked on its own (tests) gets the defaults.
pass_out = click.make_pass_decorator(Out, ensure=True)


# --- values ---------------------------------------------------------------------------------------------


def iso_millis(ms: int) -> str:
    """Epoch milliseconds (a command's timeMillis) as ISO-8601 UTC."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_seconds(seconds: float) -> str:
    return iso_millis(round(seconds * 1000))


def fmt(value: JSON) -> str:
    """One cell or text value: Java-like null/true/false (what mqadmin prints), compact JSON for nested data."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return str(value).replace("\t", " ").replace("\n", " ")  # a value must not break the line format


def _is_success_envelope(doc: JSON) -> bool:
    """A RocketMQ envelope ({"code", "codeName", ...}) whose code says SUCCESS."""
    return isinstance(doc, Mapping) and doc.get("code") == SUCCESS_CODE and "codeName" in doc


def _is_scalar_list(value: JSON) -> bool:
    return isinstance(value, list | tuple) and all(not isinstance(x, dict | list | tuple) for x in value)


def _flatten(doc: Mapping[str, JSON], prefix: str = "") -> Iterator[tuple[str, JSON]]:
    """(dotted key, value) pairs; nested maps are walked, lists of scalars are kept whole."""
    for k, v in doc.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping) and v:
            yield from _flatten(v, key)
        else:
            yield key, v


def _label(key: str) -> str:
    return key[:1].upper() + key[1:]


def _dumps(value: JSON, *, indent: int | None) -> str:
    return json.dumps(value, sort_keys=True, indent=indent, ensure_ascii=False, default=str)


# --- documents --------------------------------------------------------------------------------------------


def emit_document(
    out: Out,
    doc: Mapping[str, JSON],
    blocks: Sequence[Block] = (),
    *,
    json_doc: Mapping[str, JSON] | None = None,
    title: str | None = None,
) -> None:
    """A key/value document plus row blocks. In json mode: `json_doc` if given (for a verb whose JSON
    shape is not the human one), else the document with each block's rows under its key."""
    if out.mode == "json":
        merged = dict(json_doc) if json_doc is not None else {**doc, **{b.key: b.rows for b in blocks}}
        if out.held is not None:
            out.held.append(merged)  # written when the verb ended (Out.flush_json)
        else:
            sys.stdout.write(_dumps(merged, indent=2) + "\n")
        return
    if out.mode == "text":
        lines: list[str] = []
        for key, value in _flatten(doc):
            if _is_scalar_list(value) and value:  # one line per item, like mqadmin's `#Peer:` lines
                lines.extend(f"#{_label(key)}\t{fmt(item)}" for item in value)
            else:  # an empty list keeps its key, with an empty value
                lines.append(f"#{_label(key)}\t{'' if _is_scalar_list(value) else fmt(value)}")
        for b in blocks:
            cols = b.column_names()
            lines.append(f"#Table\t{b.key}")
            lines.append("\t".join(f"#{_label(c)}" for c in cols))
            lines.extend("\t".join(fmt(row.get(c)) for c in cols) for row in b.rows)
        sys.stdout.write("".join(line + "\n" for line in lines))
        return
    console = out.console()
    kv = Table(title=title, show_header=False, box=box.SIMPLE, title_justify="left")
    kv.add_column("key", style="bold")
    kv.add_column("value", overflow="fold")
    for key, value in _flatten(doc):
        kv.add_row(_label(key), ", ".join(fmt(x) for x in value) if _is_scalar_list(value) else fmt(value))
    console.print(kv)
    for b in blocks:
        console.print(_rich_table(b.title or b.key, b.column_names(), b.rows))


def _rich_table(title: str | None, columns: Sequence[str], rows: Iterable[Mapping[str, JSON]]) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", title_style="bold")
    for c in columns:
        t.add_column(_label(c), overflow="fold")
    n = 0
    for row in rows:
        t.add_row(*(fmt(row.get(c)) for c in columns))
        n += 1
    if not n:
        t.caption = "(none)"
    return t


# --- row lists --------------------------------------------------------------------------------------------


def emit_rows(
    out: Out,
    rows: Iterable[Mapping[str, JSON]],
    columns: Sequence[str],
    *,
    title: str | None = None,
    ndjson: bool = True,
    json_row: Callable[[Mapping[str, JSON]], JSON] | None = None,
) -> int:
    """A row list, streamed where the mode allows it (json/text write each row as it comes, so a dump of
    millions of entries never sits in memory). Returns the number of rows. `json_row` maps a row to its
    JSON form (which may carry more than the columns). Without `ndjson`, json mode writes one array."""
    write = sys.stdout.write
    n = 0
    if out.mode == "json":
        conv = json_row or (lambda r: r)
        if ndjson:
            for row in rows:
                write(_dumps(conv(row), indent=None) + "\n")
                n += 1
        else:
            items = [conv(r) for r in rows]
            n = len(items)
            write(_dumps(items, indent=2) + "\n")
        return n
    if out.mode == "text":
        write("\t".join(f"#{_label(c)}" for c in columns) + "\n")
        for row in rows:
            write("\t".join(fmt(row.get(c)) for c in columns) + "\n")
            n += 1
        return n
    materialised = list(rows)
    out.console().print(_rich_table(title, columns, materialised))
    return len(materialised)


# --- progress ---------------------------------------------------------------------------------------------


def _noop(n: int = 1) -> None:
    pass


@contextlib.contextmanager
def progress(out: Out, description: str, total: int, *, stream: IO[str] | None = None) -> Iterator[Callable[..., None]]:
    """`with progress(out, "verifying", total) as advance: advance(n)`. Draws on stderr only, and only when
    stderr is a terminal (a log file or CI output gets no bar). Transient: the bar disappears when done."""
    stream = stream if stream is not None else sys.stderr
    if total <= 0 or not stream.isatty():
        yield _noop
        return
    console = Console(file=stream, no_color=not out.color, highlight=False)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    # No stdout/stderr redirection: Rich would route our stdout rows through the stderr console meanwhile.
    with Progress(*columns, console=console, transient=True, redirect_stdout=False, redirect_stderr=False) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance
