"""`python -m tools.brokersim`: run simulated broker groups against a controller until Ctrl-C (or --duration).

One line per event on stdout (`--json`: one JSON object per line; `-v`: also the debug lines, the expected
races a broker resolves at once). `--chaos SECONDS` kills a random group's
master every SECONDS and starts it again once another master took over (or SECONDS later), so that failovers
keep happening (the demo). Every `--report-every` seconds (the first as soon as every broker's heartbeat was
answered) a summary line: how many brokers the controller answered heartbeats of, the masters, the writes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import sys
import time
from typing import Any

import click

from cli.rmqctl.client import parse_addresses
from tools.brokersim.sim import SimConfig, Simulator


def _printer(as_json: bool, verbose: bool = False) -> Any:
    """One line per event. Events with `level: debug` (expected races the broker resolves at once, e.g. two
    brokers told the same id) are left out unless `verbose`; --json prints every event."""

    def out(event: dict[str, Any]) -> None:
        if as_json:
            line = json.dumps(event, sort_keys=True)
        elif event.get("level") == "debug" and not verbose:
            return
        else:
            who = event.get("brokerName") or "brokers"
            if event.get("brokerId") is not None:
                who += f"/{event['brokerId']}"
            line = f"{time.strftime('%H:%M:%S', time.localtime(event['t']))} {who}: {event['message']}"
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    return out


async def _chaos(sim: Simulator, every: float) -> None:
    rng = random.Random()
    while True:
        await asyncio.sleep(every)
        group = rng.choice(list(sim.sets.values()))
        master = group.master()
        if master is None:
            continue
        master.kill()
        give_up = time.monotonic() + every
        while time.monotonic() < give_up and group.master() is None:  # the failover, as a broker sees it
            await asyncio.sleep(sim.cfg.heartbeat_interval_s)
        master.start()  # back as a slave of the new master (or as the master, if none was elected in time)
        new = group.master()
        if new is not None:
            lost = group.lost(new)
            sim.emit(
                {
                    "event": "check",
                    "brokerName": group.name,
                    "brokerId": new.id,
                    "address": new.address,
                    "message": f"master {new.id}: holds {len(group.acked) - len(lost)} of the {len(group.acked)} "
                    f"acknowledged writes ({len(lost)} lost)",
                }
            )


async def _report(sim: Simulator, every: float) -> None:
    """A summary line (Simulator.summary) every `every` seconds, the first as soon as every broker has had a
    heartbeat answered: the terminal of `make run` shows the brokers heartbeating, not only registering."""
    before, since = sim.beats(), time.monotonic()
    first = True
    while True:
        await asyncio.sleep(min(every, 0.5) if first else every)
        beats = sim.beats()
        if first and not all(beats.values()) and time.monotonic() - since < every:
            continue
        sim.emit(
            {
                "event": "summary",
                "brokerName": None,
                "brokerId": None,
                "address": None,
                "message": sim.summary(before, time.monotonic() - since),
            }
        )
        before, since, first = beats, time.monotonic(), False


async def _main(sim: Simulator, duration: float | None, chaos: float | None, report: float) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await sim.start()
    tasks = [loop.create_task(_chaos(sim, chaos))] if chaos else []
    if report:
        tasks.append(loop.create_task(_report(sim, report)))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), duration)
    for t in tasks:
        t.cancel()
    await sim.stop()


@click.command()
@click.option(
    "-a",
    "--address",
    "addresses",
    envvar="RMQCTL_ADDRESS",
    required=True,
    metavar="HOST:PORT[,...]",
    help="Controller HTTP addresses (any node; the leader is followed).",
)
@click.option("--groups", default=2, show_default=True, type=click.IntRange(1, 30_000), help="Broker sets.")
@click.option("--replicas", default=3, show_default=True, type=click.IntRange(1, 9), help="Brokers per set.")
@click.option("-c", "--cluster", default="DefaultCluster", show_default=True)
@click.option("--data", default=None, help="Keep identities and epoch files here (a restart keeps broker ids).")
@click.option("--base-port", default=10911, show_default=True, help="Registered broker addresses start here.")
@click.option("--heartbeat-interval", default=1.0, show_default=True, type=click.FloatRange(0.01), metavar="S")
@click.option("--heartbeat-timeout", default=10_000, show_default=True, type=click.IntRange(1), metavar="MS")
@click.option(
    "--sync-period",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.01),
    metavar="S",
    help="syncBrokerMetadataPeriod and checkSyncStateSetPeriod.",
)
@click.option(
    "--not-catchup",
    default=15_000,
    show_default=True,
    type=click.IntRange(1),
    metavar="MS",
    help="haMaxTimeSlaveNotCatchup.",
)
@click.option("--duration", default=None, type=click.FloatRange(0, min_open=True), metavar="S")
@click.option("--chaos", default=None, type=click.FloatRange(1), metavar="S", help="Kill a master every S seconds.")
@click.option(
    "--report-every",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0),
    metavar="S",
    help="A summary line (heartbeats answered, masters, writes) every S seconds; 0: none.",
)
@click.option("--token", envvar="RMQCTL_TOKEN", default=None, help="Admin token, if the controller has one.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also print the debug lines: expected races resolved at once (two brokers told the same id).",
)
@click.option(
    "--remoting",
    is_flag=True,
    help="The addresses are jRaftControllerRPCAddr entries: speak RocketMQ remoting, as a real broker does.",
)
def main(
    addresses: str,
    groups: int,
    replicas: int,
    cluster: str,
    data: str | None,
    base_port: int,
    heartbeat_interval: float,
    heartbeat_timeout: int,
    sync_period: float,
    not_catchup: int,
    duration: float | None,
    chaos: float | None,
    report_every: float,
    token: str | None,
    as_json: bool,
    verbose: bool,
    remoting: bool,
) -> None:
    """Simulated RocketMQ broker replica groups (controller mode) against a running controller."""
    cfg = SimConfig(
        cluster=cluster,
        heartbeat_interval_s=heartbeat_interval,
        heartbeat_timeout_ms=heartbeat_timeout,
        sync_metadata_period_s=sync_period,
        check_sync_state_set_period_s=sync_period,
        ha_max_time_slave_not_catchup_ms=not_catchup,
    )
    sim = Simulator(
        parse_addresses(addresses),
        groups,
        replicas,
        cfg,
        data=data,
        base_port=base_port,
        token=token,
        on_event=_printer(as_json, verbose),
        remoting=remoting,
    )
    asyncio.run(_main(sim, duration, chaos, report_every))


if __name__ == "__main__":
    main()
