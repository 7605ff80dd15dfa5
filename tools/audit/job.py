"""rmq-audit / spark-submit tools/audit/job.py: the offline snapshot audit (docs/audit.md).

    rmq-audit [--master M] [--out DIR] PATH...          # builds its own SparkSession (local[*] by default)
    spark-submit --master yarn tools/audit/job.py PATH...   # keeps spark-submit's master

Pipeline (every arrow a Spark stage; the driver only merges small summaries):
  segments --scan--> cached scans --(group, chunk)--> log matching, canonical sources
  cached scans --route by broker-set/KV key/config--> buckets  <--cogroup-->  snapshot slices --> replay
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
import uuid
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the project importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import click

from tools.audit import cds
from tools.audit.model import EXIT_CORRUPT, EXIT_DIVERGENCE, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE

FAIL_ON = {"error": 2, "warning": 1, "never": 99}
# The JVM this process starts for a local master only moves bytes between the Python workers and holds the
# cache and the shuffle files: C1 alone and the serial collector do that at about half the CPU of the
# default C2 compiler and G1's concurrent threads (docs/audit.md, Performance), CPU that local[*] takes
# from the tasks. Not applied under spark-submit (its JVM already runs) or with PYSPARK_SUBMIT_ARGS set.
LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# A local master binds the driver, its block manager and its UI to loopback: Spark's default is the machine's
# first non-loopback interface (and 0.0.0.0 for the UI), which an offline audit has no reason to open.
LOOPBACK = "127.0.0.1"


def jvm_options() -> str:
    """LOCAL_JVM_OPTIONS and the class-data archive of tools/audit/cds.py when `RMQ_AUDIT_CDS_ARCHIVE` names a
    whole one: what a local run's JVM gets, and every JVM of the suite's Spark cluster tests."""
    return f"{LOCAL_JVM_OPTIONS} {cds.options()}".strip()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True)
@click.option("--master", help="Spark master; wins over everything (default: spark-submit's, else local[*]).")
@click.option("--out", "out", help="Output dir (local or a Hadoop URI); default: ./rmq-audit-<run id>.")
@click.option("--run-id", help="Run id written with every row (default: UTC time + random suffix).")
@click.option(
    "--fail-on",
    type=click.Choice(list(FAIL_ON)),
    default="warning",
    show_default=True,
    help="Lowest severity that makes the exit code non-zero.",
)
@click.option(
    "--buckets",
    type=click.IntRange(1, 100_000),
    help="Broker-set replay partitions (default: 2 x the default parallelism).",
)
@click.option(
    "--broker-epochs",
    "broker_epochs",
    multiple=True,
    metavar="DIR",
    help="Brokers' store dirs (or a dir above them) holding epochFileCheckpoint: check every broker's epoch "
    "history against the controller's log (broker.epoch). Repeatable.",
)
@click.option("--log-level", default="WARN", show_default=True, help="Spark's log level.")
@click.option(
    "--conf",
    "confs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark property, as spark-submit's --conf (repeatable): spark.archives, spark.executor.memory...",
)
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
def command(
    paths: tuple[str, ...],
    master: str | None,
    out: str | None,
    run_id: str | None,
    fail_on: str,
    buckets: int | None,
    log_level: str,
    confs: tuple[str, ...],
    no_plots: bool,
    broker_epochs: tuple[str, ...],
) -> None:
    """Audit RocketMQ controller data directories: WAL integrity, log matching across nodes, and every
    snapshot against a replay of the log. Exit 0 clean, 1 divergence, 2 usage, 3 corrupt input, 4 internal."""
    from tools.audit.cluster import absolute, unreadable_input
    from tools.audit.discover import InputError
    from tools.audit.pipeline import Options, run

    for p in paths:  # local paths are checked before a JVM starts; URIs when Hadoop lists them
        if "://" not in p and not os.path.isdir(p):
            click.echo(f"rmq-audit: error: {p}: not a directory (expected a data dir or a dir above some)", err=True)
            raise SystemExit(EXIT_USAGE)
    for p in broker_epochs:
        if "://" not in p and not os.path.isdir(p):
            click.echo(
                f"rmq-audit: error: --broker-epochs {p}: not a directory (expected brokers' store dirs, or a dir "
                "above them, holding epochFileCheckpoint)",
                err=True,
            )
            raise SystemExit(EXIT_USAGE)
    conf_items: dict[str, str] = {}
    for item in confs:
        key, eq, value = item.partition("=")
        if not eq or not key.startswith("spark."):
            click.echo(f"rmq-audit: error: --conf {item}: expected spark.KEY=VALUE", err=True)
            raise SystemExit(EXIT_USAGE)
        conf_items[key] = value
    run_id = run_id or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    # Executors resolve a relative path against their worker's directory: every local path goes out absolute.
    out = absolute(out or f"rmq-audit-{run_id}")
    paths = tuple(absolute(p) for p in paths)
    broker_epochs = tuple(absolute(p) for p in broker_epochs)
    spark = session(master, log_level, properties=conf_items)
    try:
        ui = spark.sparkContext.uiWebUrl
        click.echo(
            f"rmq-audit: run {run_id}, master {spark.sparkContext.master}, Spark UI {ui or 'disabled'}", err=True
        )
        if ship_code(spark) is not None:
            check_executors(spark)
        opts = Options(
            list(paths), out, run_id, buckets, FAIL_ON[fail_on], plots=not no_plots, broker_epochs=list(broker_epochs)
        )
        try:
            result = run(spark, opts, progress=lambda m: click.echo(f"rmq-audit: {m}", err=True))
        except InputError as e:
            click.echo(f"rmq-audit: error: {e}", err=True)
            raise SystemExit(EXIT_USAGE) from None
        except Exception as e:  # noqa: BLE001 - a job failed: an input an executor cannot read is a usage error
            bad = unreadable_input(e)
            if bad is None:
                raise
            click.echo(f"rmq-audit: error: {bad.message()}", err=True)
            raise SystemExit(EXIT_USAGE) from None
        click.echo(result.table())
        click.echo(f"rmq-audit: {result.total} finding(s); output in {out}")
        raise SystemExit(result.exit_code)
    finally:
        spark.stop()


def session(
    master: str | None, log_level: str = "WARN", properties: dict[str, str] | None = None, **conf_items: str
) -> Any:
    """Master precedence: --master, else a master already set (spark-submit, spark-defaults), else local[*].
    `properties`: Spark properties by their names; `conf_items`: the same with `_` for `.` (spark_ui_enabled=...).
    A local master binds to 127.0.0.1 (LOOPBACK) unless SPARK_LOCAL_IP or the driver's properties say otherwise."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        click.echo("rmq-audit: error: pyspark is not installed (pip install -e '.[audit]', or make setup)", err=True)
        raise SystemExit(EXIT_USAGE) from None

    launch = None
    if not ({"PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS"} & os.environ.keys()) and (
        master is None or master.startswith("local")
    ):
        launch = SparkConf(loadDefaults=False).set("spark.driver.extraJavaOptions", jvm_options())
        # read by the JVM we start (its UI's bind address, and the default of every other one) and by the
        # Python workers it forks
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    SparkContext._ensure_initialized(conf=launch)  # so that SparkConf reads what spark-submit set (JVM properties)
    conf = SparkConf()
    if master:
        conf.setMaster(master)
    elif not conf.contains("spark.master"):
        conf.setMaster("local[*]")
    conf.setIfMissing("spark.app.name", "rmq-audit")
    conf.setIfMissing("spark.sql.session.timeZone", "UTC")
    conf.setIfMissing("spark.ui.showConsoleProgress", "true")
    if conf.get("spark.master", "").startswith("local"):
        conf.setIfMissing("spark.driver.host", LOOPBACK)
        conf.setIfMissing("spark.driver.bindAddress", LOOPBACK)
    for key, value in conf_items.items():
        conf.set(key.replace("_", "."), value)
    for key, value in (properties or {}).items():
        conf.set(key, value)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def ship_code(spark: Any) -> str | None:
    """On a cluster, zip the project's packages and addPyFile them, so executors decode with the same code.
    Local masters share the driver's interpreter and need nothing."""
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        return None
    import tempfile
    import zipfile

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(tempfile.mkdtemp(prefix="rmq-audit-"), "rmq_controller.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        # cli.rmqctl.state (the tables the tasks decode) imports the package cli.rmqctl, whose verbs import api
        for pkg in ("raft", "snapshot", "statemachine", "api", "cli", "tools"):
            for d, dirs, files in os.walk(os.path.join(root, pkg)):
                dirs[:] = [x for x in dirs if x != "__pycache__"]
                for f in files:
                    if f.endswith(".py"):
                        full = os.path.join(d, f)
                        z.write(full, os.path.relpath(full, root))
    sc.addPyFile(path)
    return path


def check_executors(spark: Any) -> None:
    """On a cluster, say which Python the executors run (a packed environment shipped with --archives unpacks
    under each executor's directory; docs/audit.md) and stop with a usage error when one cannot import the
    audit, instead of failing in the first stage with an executor's traceback."""
    from tools.audit.cluster import executor_pythons

    for p in executor_pythons(spark.sparkContext):
        click.echo(
            f"rmq-audit: executor host {p.host}: Python {p.version} {p.executable} (prefix {p.prefix})", err=True
        )
        if p.error is not None:
            click.echo(
                f"rmq-audit: error: executor host {p.host}: {p.executable} cannot run the audit ({p.error}): ship "
                "a Python environment with its dependencies (venv-pack + --archives + PYSPARK_PYTHON; "
                "docs/audit.md, On a cluster)",
                err=True,
            )
            raise SystemExit(EXIT_USAGE)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    try:
        command.main(args=argv, prog_name="rmq-audit", standalone_mode=False)
    except SystemExit as e:
        return int(e.code or 0)
    except click.UsageError as e:
        e.show()
        return EXIT_USAGE
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        return EXIT_USAGE
    except Exception as e:  # noqa: BLE001 - anything unexpected: exit 4, with the traceback for the bug report
        import traceback

        traceback.print_exc()
        click.echo(f"rmq-audit: internal error after {time.monotonic() - started:.1f}s: {e!r}", err=True)
        return EXIT_INTERNAL
    return EXIT_OK


__all__ = ["EXIT_CORRUPT", "EXIT_DIVERGENCE", "main", "session", "ship_code"]

if __name__ == "__main__":
    raise SystemExit(main())
