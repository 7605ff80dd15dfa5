"""python -m tools.torture crash|corrupt [options]: the full forms of the sweeps (docs/reliability.md)."""

from __future__ import annotations

import sys
import tempfile

import click

from tools.torture import corrupt as corrupt_mod
from tools.torture import crash as crash_mod


@click.group()
def cli() -> None:
    """Crash-point and corruption sweeps against real controllerd processes on loopback."""


@cli.command()
@click.option("--dir", "root", default=None, help="working directory (default: a fresh temp dir)")
@click.option("--max-hit", default=150, show_default=True, help="largest hit count tried per point")
@click.option("--window", default=600, show_default=True, help="acked writes an armed node gets to reach its point")
@click.option("--target", default=1000, show_default=True, help="stop after this many crashes at a point")
@click.option("--budget", default=3600.0, show_default=True, help="stop after this many seconds")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def crash(root: str | None, max_hit: int, window: int, target: int, budget: float, as_json: bool) -> None:
    """kill -9 nodes at failpoints, restart, check no acknowledged write is lost."""
    root = root or tempfile.mkdtemp(prefix="torture-crash-")
    click.echo(f"crash sweep in {root}")
    report = crash_mod.run(root, max_hit=max_hit, window=window, budget_s=budget, target=target, echo=click.echo)
    code = crash_mod.main_report(report, echo=click.echo)
    if as_json:
        click.echo(report.to_json())
    sys.exit(code)


@cli.command()
@click.option("--dir", "root", default=None, help="working directory (default: a fresh temp dir)")
@click.option("--sample", default=1, show_default=True, help="run every Nth case of the enumeration (1: all)")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(corrupt_mod.KINDS), help="only these files")
@click.option("--mutation", "mutations", multiple=True, type=click.Choice(corrupt_mod.MUTATIONS), help="only these")
def corrupt(root: str | None, sample: int, kinds: tuple[str, ...], mutations: tuple[str, ...]) -> None:
    """Damage a stopped node's files at every record/section boundary, start it, compare with the healthy replicas."""
    root = root or tempfile.mkdtemp(prefix="torture-corrupt-")
    click.echo(f"corruption sweep in {root}")
    report = corrupt_mod.run(root, sample=sample, kinds=kinds, mutations=mutations, echo=click.echo)
    for line in corrupt_mod.iter_lines(report):
        click.echo(line)
    sys.exit(1 if report.silent or report.unnamed else 0)


if __name__ == "__main__":
    cli()
