"""Adopting a live RocketMQ cluster from RocketMQ's DLedgerController, then rolling back to it, with real
brokers (docs/migration.md): test_migration.py's Migration, from the other controller RocketMQ ships. In a file
of its own so that `make test` can run it beside the offline files (the Makefile's ALONGSIDE): it mostly waits."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from cli import rocketmq
from cli.rocketmq import Deployment, wait_until
from tests.interop.test_migration import Migration, rmqctl

# Two switches, each waiting for the brokers' fixed 120 s controllerAddr refresh, then every message read back: 285-291 s
# in fresh-clone runs, at the 300 s default. It hit that timeout once (2026-11-29, already in its last consume).
pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop"), pytest.mark.timeout(600)]


def test_adopt_from_dledger_controller_and_roll_back(tmp_path: Any) -> None:
    """DLedgerController's state reads the same way (the same remoting codes). Then the rollback window: the
    brokers are switched to our group and, our group having elected nothing, back to DLedger started again from
    its store; DLedger holds every master at its epoch (or, when a slave reached it first, elected that in-sync
    slave at a higher epoch), and every acknowledged message is read."""
    rocketmq.require()
    with Deployment(os.path.join(str(tmp_path), "rmq")) as d:
        m = Migration(str(tmp_path), d, "dledger", ("dl-a",))
        try:
            m.producer.wait_acked(100)
            m.adopt()
            m.switch(m.ours.remotings, "our group's", m.stop_old())
            m.unchanged(m.heartbeating_ours())
            m.tl.step("every broker heartbeats our group; masters and epochs unchanged")
            nothing = rmqctl(
                "migrate",
                "verify",
                "--file",
                os.path.join(str(tmp_path), "export.json"),
                "--to",
                ";".join(m.ours.remotings),
                "-o",
                "json",
            )
            assert nothing.returncode == 0, nothing.stdout + nothing.stderr  # nothing elected: the rollback window
            # Roll back: our group stops, DLedger starts again from its own store, the brokers go back to it.
            m.ours.stop_all()
            stopped = time.monotonic()
            m.tl.step("rollback: our group stopped")
            m.old.start()
            m.tl.step("DLedger controllers started again")
            m.switch(m.old.remotings, "DLedger", stopped)

            def all_alive() -> dict[str, dict[str, Any]] | None:
                sets = m.settled(m.old.remotings)
                ok = sets is not None and all(b["alive"] for s in sets.values() for b in s["brokers"])
                return sets if ok else None

            back = wait_until("DLedger sees every broker alive again", all_alive, 90)
            for n in m.sets:
                now, was = back[n], m.exported[n]
                if (now["masterBrokerId"], now["masterEpoch"]) == (was["masterBrokerId"], was["masterEpoch"]):
                    m.tl.step(f"rolled back: DLedger holds {n}'s master {was['masterBrokerId']} at its epoch")
                    continue
                # RocketMQ's behaviour (docs/migration.md, Rollback): the set's slave reached DLedger before its
                # master, and DLedgerController's scan for inactive masters (every scanInactiveMasterInterval,
                # 5 s) elected it. Safe only if it was in the SyncStateSet, and at a higher epoch.
                assert now["masterBrokerId"] in was["syncStateSet"] and now["masterEpoch"] > was["masterEpoch"], (
                    n,
                    now,
                )
                m.tl.step(
                    f"rolled back: DLedger elected {n}'s in-sync slave {now['masterBrokerId']} (epoch {now['masterEpoch']})"
                )
            acked = len(m.producer.acked())
            m.producer.wait_acked(acked + 50, 60)
            m.finish("migration timeline (DLedgerController -> ours -> DLedgerController)")
        finally:
            if m.producer.proc.running():
                m.producer.stop()
            m.ours.stop_all()
