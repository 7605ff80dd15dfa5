"""`controllerd`: the controller daemon's command line (RocketMQ `mqcontroller` conventions).

    controllerd --type jraft -c node.conf        start one node: RocketMQ remoting on its jRaftControllerRPCAddr
                                                 entry, HTTP on its controllerHttpAddr entry (default: port - 1000)
    controllerd --type jraft -c node.conf -p     print the effective config (sources as comments) and exit
    controllerd check-config -c node.conf        validate and exit (an unknown key is an error; --lenient: a warning)
    controllerd local-cluster                    a 3-node loopback cluster under ./data (make run)

SIGHUP: the remoting, HTTPS and peer certificates are reloaded (docs/security.md).
SIGTERM or SIGINT: a leader hands leadership to the most caught-up voter, HTTP stops, the log is flushed,
exit 0. Exit codes: 0 ok; 1 the node failed (data directory locked, no loadable state, storage error);
2 usage or config error (the message names key, value and file:line on stderr).
"""

from __future__ import annotations

import asyncio
import logging
import signal

import click

from cli.config import (
    ConfigError,
    ConfigWarning,
    ControllerConfig,
    PeerFiles,
    audit_log_path,
    effective_items,
    http_address,
    http_addresses,
    is_loopback,
    load_config,
    metrics_export,
    parse_config,
    properties_lines,
    remoting_address,
    remoting_addresses,
    tls_settings,
    to_service_options,
    unknown_keys,
)
from cli.localcluster import local_cluster

EXIT_FAILED = 1
EXIT_CONFIG = 2

log = logging.getLogger("controllerd")

_HELP = """Run a RocketMQ jRaft controller node from a RocketMQ .properties file.

\b
  controllerd --type jraft -c FILE        start the node; SIGTERM/Ctrl-C stops it cleanly
  controllerd --type jraft -c FILE -p     print the effective config (a .properties file, sources as
                                          comments, secrets not printed) and exit
  controllerd check-config [--lenient|--strict] -c FILE
                                          validate FILE, print every warning and error and exit; an
                                          unknown key is an error (--lenient: a warning, as RocketMQ)
  controllerd local-cluster               run a 3-node loopback cluster under ./data (make run);
                                          `local-cluster status|stop|start|restart NODE` while it runs

Exit codes: 0 ok, 1 the node failed, 2 usage or config error. See docs/config.md for every key.
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


LENIENT_HINT = (
    "RocketMQ ignores an unknown key silently, so a misspelt key leaves its setting on the default: correct "
    "it, or pass --lenient to accept unknown keys with a warning"
)


def _report(warnings: list[str] | tuple[str, ...], lenient: bool) -> list[ConfigWarning]:
    """Every warning on stderr, in file order; unknown keys as errors unless `lenient`. Returns those."""
    unknown = [] if lenient else unknown_keys(list(warnings))
    for w in warnings:
        if isinstance(w, ConfigWarning) and w in unknown:
            click.echo(f"controllerd: config error: {w.error_text()}", err=True)
        else:
            click.echo(f"controllerd: warning: {w}", err=True)
    return unknown


def _load(
    config_file: str | None, controller_type: str | None, strict: bool = False, lenient: bool = True
) -> tuple[ControllerConfig, list[str]]:
    """The config and its warnings, every warning on stderr; every error on stderr and exit 2 (also for a
    warning if `strict`, and for an unknown key unless `lenient`: check-config's default)."""
    try:
        if config_file is None:
            cfg, warnings = parse_config("", "<defaults>", controller_type=controller_type)
        else:
            cfg, warnings = load_config(config_file, controller_type=controller_type)
    except ConfigError as e:
        unknown = _report(e.warnings, lenient)
        for error in e.errors:
            click.echo(f"controllerd: config error: {error}", err=True)
        if unknown:
            click.echo(f"controllerd: config error: {LENIENT_HINT}", err=True)
        raise SystemExit(EXIT_CONFIG) from None
    unknown = _report(warnings, lenient or strict)
    if strict and warnings:
        click.echo(f"controllerd: config error: {len(warnings)} warning(s), fatal with --strict", err=True)
        raise SystemExit(EXIT_CONFIG)
    if unknown:
        click.echo(f"controllerd: config error: {len(unknown)} unknown key(s). {LENIENT_HINT}", err=True)
        raise SystemExit(EXIT_CONFIG)
    return cfg, warnings


@click.group(
    invoke_without_command=True,
    help=_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@_type_option
@click.option("-c", "--configFile", "config_file", metavar="FILE", help="The .properties config file.")
@click.option("-p", "--printConfigItem", "print_config", is_flag=True, help="Print the effective config and exit.")
@click.option(
    "--log-format",
    type=click.Choice(["auto", "json", "console"]),
    default="auto",
    show_default=True,
    help="auto: console on a TTY, JSON lines otherwise.",
)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
)
@click.option("--access-log", is_flag=True, help="Log every HTTP request (off: it costs throughput).")
@click.pass_context
def main(
    ctx: click.Context,
    controller_type: str | None,
    config_file: str | None,
    print_config: bool,
    log_format: str,
    log_level: str,
    access_log: bool,
) -> None:
    ctx.obj = {"controller_type": controller_type, "config_file": config_file}
    if ctx.invoked_subcommand is not None:
        return
    if print_config:
        cfg, _ = _load(config_file, controller_type)
        click.echo("\n".join(properties_lines(cfg)))
        return
    if config_file is None:
        raise click.UsageError("starting a node needs -c FILE (a RocketMQ controller .properties file)")
    # A node starts as RocketMQ's does, ignoring unknown keys; its boot line names them (ignored_keys_note).
    cfg, warnings = _load(config_file, controller_type)
    raise SystemExit(run_node(cfg, log_format, log_level, access_log, ignored=unknown_keys(warnings)))


def ignored_keys_note(path: str, ignored: list[ConfigWarning]) -> str:
    """What the boot line adds when the node started ignoring unknown keys ("" when none): each key with its
    line and "did you mean", so the operator sees that a setting is not in effect without reading back."""
    if not ignored:
        return ""
    keys = ", ".join(f"{w.unknown_key} at line {w.line}{w.hint}" for w in ignored)
    return (
        f"; IGNORED {len(ignored)} unknown key(s) of {path}, their settings are NOT in effect: {keys} "
        "(`controllerd check-config` fails on them)"
    )


def run_node(
    cfg: ControllerConfig,
    log_format: str = "auto",
    log_level: str = "info",
    access_log: bool = False,
    ignored: list[ConfigWarning] | None = None,
) -> int:
    """Run one node until SIGTERM/SIGINT; the process exit code. `ignored`: the unknown keys the file had,
    named in the boot line (the last start-up line)."""
    from api.logs import install
    from api.server import ControllerServer, settle_gc, settle_switch_interval
    from api.service.settings import ApiSettings, pairs

    host, port = http_address(cfg)
    options = to_service_options(cfg)
    server = ControllerServer(
        options,
        ApiSettings(
            admin_token=cfg.admin_token,
            admin_token_file=cfg.admin_token_file or None,
            max_body_bytes=cfg.http_max_body_bytes,
            max_connections=cfg.http_max_connections,
            keep_alive_s=float(cfg.http_keep_alive_secs),
            remoting_max_frame_bytes=cfg.remoting_max_frame_bytes,
            address=cfg.server_id,  # RocketMQ labels jRaft metrics with jRaftServerId as address and peer_id
            group=cfg.group_id,
            peer_id=cfg.server_id,
            config_black_list=cfg.config_black_list,
            metrics_labels=pairs(cfg.metrics_label, "metricsLabel"),
            metrics_export=metrics_export(cfg),
            local_config={key: value for key, value, _source in effective_items(cfg)},
            remoting_tls=tls_settings(cfg),
            remoting_acl_file=cfg.acl_file or None,
            audit_log=audit_log_path(cfg),
            http_tls=cfg.http_tls,
        ),
        (host, port),
        access_log=access_log,
        remoting_address=remoting_address(cfg),
    )
    install(server.service, log_format, log_level)
    log.info("load config properties file OK, %s", cfg.path)
    exposure = open_remoting_warning(cfg)
    if exposure:
        log.warning("%s", exposure)

    async def serve() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        peer_tls = options.node.tls

        def reload_certificates() -> None:  # SIGHUP: every certificate now (a change of its files does it anyway)
            server.reload_tls()
            if isinstance(peer_tls, PeerFiles):
                peer_tls.reload()

        loop.add_signal_handler(signal.SIGHUP, reload_certificates)
        try:
            await server.start()
        except Exception as e:  # noqa: BLE001 - any start failure is reported in one line, exit 1
            log.error("the controller failed to start: %s%s", e, corruption_fix(e, cfg.server_id, cfg.store_path))
            await server.service.stop(transfer=False)
            return EXIT_FAILED
        settle_gc()  # after start-up: shorter, rarer collector pauses while serving
        settle_switch_interval()  # a worker thread (a scrape's formatting) gives the loop the interpreter back sooner
        note = ignored_keys_note(cfg.path, ignored or [])
        log.log(
            logging.WARNING if note else logging.INFO,
            "The Controller Server boot success. node %s, remoting %s, HTTP %s:%d, data %s%s",
            cfg.server_id,
            remoting_addresses(cfg)[cfg.server_id],
            host,
            port,
            cfg.store_path,
            note,
        )
        failed = loop.create_task(server.service.wait_failed())
        await asyncio.wait([loop.create_task(stop.wait()), failed], return_when=asyncio.FIRST_COMPLETED)
        code = EXIT_FAILED if failed.done() else 0
        failed.cancel()
        log.info("stopping%s", " after a fatal error" if code else " (signal)")
        await server.stop()
        log.info("stopped")
        return code

    return _run(serve())


def open_remoting_warning(cfg: ControllerConfig) -> str:
    """The start-up warning when the remoting port is reachable from other hosts and nothing checks who
    sends requests ("" when it listens on loopback, or TLS requires verified client certificates)."""
    host, port = remoting_address(cfg)
    if is_loopback(host) or cfg.acl_file or tls_settings(cfg).effective().verifies_clients:
        return ""
    return (
        f"RocketMQ remoting listens on non-loopback {host}:{port} and accepts requests from anyone who can "
        "reach it, state-changing ones included (1011 CLEAN_BROKER_DATA, 1002 ELECT_MASTER, ...): set controllerAclFile "
        "(signed requests), require client certificates (tls.server.mode=enforcing, tls.test.mode.enable=false, "
        "tls.server.need.client.auth=require, tls.server.authClient=true, tls.server.trustCertPath), or firewall the "
        "port (docs/security.md)"
    )


def _run(coro: object) -> int:
    try:
        import uvloop  # noqa: PLC0415 - optional: ~5% more throughput for HTTP and raft IO

        return uvloop.run(coro)  # type: ignore[arg-type]
    except ImportError:
        return asyncio.run(coro)  # type: ignore[arg-type]


@main.command("check-config")
@_type_option
@click.option("-c", "--configFile", "config_file", metavar="FILE", help="The .properties config file.")
@click.option("--strict", is_flag=True, help="Warnings (ignored keys, duplicates, ...) are errors too.")
@click.option(
    "--lenient",
    is_flag=True,
    help="An unknown key is a warning, not an error (RocketMQ's MixAll.properties2Object ignores it silently).",
)
@click.pass_context
def check_config(
    ctx: click.Context, controller_type: str | None, config_file: str | None, strict: bool, lenient: bool
) -> None:
    """Validate a config file: every warning and every error on stderr; exit 0 if it can start a node as
    written, 2 if not. An unknown key (a misspelt one: RocketMQ would ignore it and the node would run on the
    default) is an error naming key, file:line and the nearest known key; --lenient makes it a warning.
    --strict makes every warning an error."""
    if strict and lenient:
        raise click.UsageError("--strict and --lenient contradict each other: pass one")
    config_file = config_file or ctx.obj["config_file"]
    if config_file is None:
        raise click.UsageError("check-config needs -c FILE")
    cfg, _ = _load(config_file, controller_type or ctx.obj["controller_type"], strict, lenient=lenient)
    click.echo(f"{config_file}: OK")
    http_source = cfg.sources["controllerHttpAddr"]
    click.echo(
        f"  node {cfg.server_id}: RocketMQ remoting (brokers' controllerAddr, mqadmin -a) on "
        f"{remoting_addresses(cfg)[cfg.server_id]}, HTTP (rmqctl -a) on {http_addresses(cfg)[cfg.server_id]}"
        f"{' (' + http_source + ')' if http_source.startswith('default') else ''}"
    )


def corruption_fix(exc: BaseException, server_id: str, store: str) -> str:
    """The fix to print after a start failure caused by a damaged store file, or by a store whose state cannot be
    rebuilt (its only snapshots damaged, its log compacted past them); "" for any other failure."""
    from raft.node.snapshots import StoreNotRebuildableError
    from raft.storage.meta import MetaCorruptionError
    from raft.storage.segment import LogCorruptionError
    from snapshot.errors import SnapshotFormatError

    damaged = LogCorruptionError | MetaCorruptionError | SnapshotFormatError | StoreNotRebuildableError
    e: BaseException | None = exc
    while e is not None and not isinstance(e, damaged):
        e = e.__cause__ or e.__context__
    if e is None:
        return ""
    return (
        f". Fix: keep a copy of {store} for analysis; restore the damaged file from a backup, or rebuild this "
        f"member: on the leader DELETE /api/v1/raft/peers/{server_id}, empty {store}, start this node and POST "
        f'/api/v1/raft/peers {{"id": "{server_id}"}} (it is then repaired from the others by '
        f"InstallSnapshot; docs/reliability.md)"
    )


main.add_command(local_cluster)

if __name__ == "__main__":  # pragma: no cover
    main()
