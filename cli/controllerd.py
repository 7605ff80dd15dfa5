"""`controllerd`: the controller daemon's command line (RocketMQ `mqcontroller` conventions).

Implemented now: `controllerd [--type jraft] -c FILE -p` (print the effective config and exit) and
`controllerd check-config -c FILE` (validate and exit). Starting a node arrives with the HTTP layer.

Exit codes: 0 ok; 2 usage or config error (the message names key, value and file:line on stderr).
"""

from __future__ import annotations

import click

from cli.config import ConfigError, ControllerConfig, effective_items, load_config, parse_config

EXIT_CONFIG = 2

_HELP = """Run a RocketMQ jRaft controller node from a RocketMQ .properties file.

\b
For now one of these is required (starting the node arrives with the HTTP layer):
  controllerd [--type jraft] -c FILE -p   print the effective config as key=value and exit
  controllerd check-config -c FILE        validate FILE, print warnings and exit

Exit codes: 0 ok, 2 usage or config error. See docs/config.md for every key.
"""


def _check_type(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None and value.lower() != "jraft":
        raise click.BadParameter(f"{value!r}: only 'jraft' is implemented (DLedger is not)")
    return value


_type_option = click.option(
    "--type",
    "controller_type",
    metavar="jraft",
    callback=_check_type,
    help="Controller type; only jraft. Wins over controllerType in the file.",
)


def _load(config_file: str | None, controller_type: str | None) -> ControllerConfig:
    try:
        if config_file is None:
            cfg, warnings = parse_config("", "<defaults>", controller_type=controller_type)
        else:
            cfg, warnings = load_config(config_file, controller_type=controller_type)
    except ConfigError as e:
        click.echo(f"controllerd: config error: {e}", err=True)
        raise SystemExit(EXIT_CONFIG) from None
    for w in warnings:
        click.echo(f"controllerd: warning: {w}", err=True)
    return cfg


@click.group(
    invoke_without_command=True,
    help=_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@_type_option
@click.option("-c", "--configFile", "config_file", metavar="FILE", help="The .properties config file.")
@click.option("-p", "--printConfigItem", "print_config", is_flag=True, help="Print the effective config and exit.")
@click.pass_context
def main(ctx: click.Context, controller_type: str | None, config_file: str | None, print_config: bool) -> None:
    ctx.obj = {"controller_type": controller_type, "config_file": config_file}
    if ctx.invoked_subcommand is not None:
        return
    if not print_config:
        raise click.UsageError(
            "nothing to do: pass -p to print the effective config, or use `controllerd check-config -c FILE`; "
            "starting a node is not implemented yet"
        )
    cfg = _load(config_file, controller_type)
    for key, value, _source in effective_items(cfg):
        click.echo(f"{key}={value}")


@main.command("check-config")
@_type_option
@click.option("-c", "--configFile", "config_file", metavar="FILE", help="The .properties config file.")
@click.pass_context
def check_config(ctx: click.Context, controller_type: str | None, config_file: str | None) -> None:
    """Validate a config file: warnings on stderr; exit 0 if it can start a node, 2 if not."""
    config_file = config_file or ctx.obj["config_file"]
    if config_file is None:
        raise click.UsageError("check-config needs -c FILE")
    _load(config_file, controller_type or ctx.obj["controller_type"])
    click.echo(f"{config_file}: OK")


if __name__ == "__main__":  # pragma: no cover
    main()
