"""`python -m jepsen`: the Jepsen suite's command line (docs/jepsen.md).

    python -m jepsen check HISTORY [--out results.json] [--budget SECONDS] [--shrink-budget SECONDS]

Exit codes (docs/jepsen.md): 0 valid, 1 invalid, 2 unknown, 3 malformed input. A bad command line or an
unreadable file counts as malformed input too (3), so that 2 always means "unknown".

Each command returns its exit code; `JepsenGroup.main` turns it into the process's exit status.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from jepsen.checker.linearizable import DEFAULT_BUDGET_S, DEFAULT_MAX_CONFIGS, DEFAULT_SHRINK_BUDGET_S
from jepsen.history import HistoryError, read_history
from jepsen.suite import EXIT_CODE, EXIT_MALFORMED, CheckOptions, check_history, summary


class JepsenGroup(click.Group):
    """A click group whose usage errors exit with 3 (click's default, 2, means "unknown" here) and whose
    commands return their exit code."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        standalone = kwargs.pop("standalone_mode", True)
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.ClickException as e:
            if not standalone:
                raise
            e.show()
            sys.exit(EXIT_MALFORMED)
        except click.Abort:
            if not standalone:
                raise
            click.echo("Aborted!", err=True)
            sys.exit(130)
        if standalone:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


@click.group(cls=JepsenGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """The Jepsen suite of the controller: record a history under faults, then check it."""


@cli.command("check")
@click.argument("history", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the results JSON (default: results.json next to HISTORY).",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=0),
    default=DEFAULT_BUDGET_S,
    show_default=True,
    help="Seconds the linearizability checker may spend; keys left unchecked are 'unknown'.",
)
@click.option(
    "--max-configs",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_CONFIGS,
    show_default=True,
    help="Configurations the linearizability search may cache before it answers 'unknown'.",
)
@click.option(
    "--shrink-budget",
    type=click.FloatRange(min=0),
    default=DEFAULT_SHRINK_BUDGET_S,
    show_default=True,
    help="Seconds for shrinking the counterexamples of invalid keys, after every verdict is known.",
)
def check(history: Path, out: Path | None, budget: float, max_configs: int, shrink_budget: float) -> int:
    """Check HISTORY (history.jsonl) with the checkers of the workloads found in it.

    Prints a one-screen summary and writes the results JSON. Exits 0 when valid, 1 when invalid,
    2 when unknown and 3 on malformed input.
    """
    try:
        hist = read_history(history)
        results = check_history(
            hist, CheckOptions(budget_s=budget, max_configs=max_configs, shrink_budget_s=shrink_budget)
        )
    except HistoryError as e:
        click.echo(f"{history}: {e}", err=True)
        return EXIT_MALFORMED
    except (OSError, UnicodeDecodeError) as e:
        click.echo(f"{history}: cannot read: {e}", err=True)
        return EXIT_MALFORMED
    for line in summary(results):
        click.echo(line)
    out = out or history.with_name("results.json")
    write_results(out, results)
    click.echo(f"results: {out}")
    return EXIT_CODE[results["verdict"]]


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=2, default=repr) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# `python -m jepsen run` (the harness) registers here the same way, e.g.:
#     from jepsen.run import run
#     cli.add_command(run)


def main() -> None:
    cli(prog_name="python -m jepsen")


from jepsen.run import run  # noqa: E402 - the harness registers after the group

cli.add_command(run)

if __name__ == "__main__":
    main()
