"""cli.rocketmq.settle_past_ha_race without a JVM: brokers whose store.log is a string. A slave seen replicating
from the demoted master is restarted once, only after its grace; a set that settles is never touched."""

from __future__ import annotations

from typing import Any, cast

import pytest

from cli.rocketmq import Broker, settle_past_ha_race


class FakeBroker:
    def __init__(self, name: str, ha_addr: str, log: str = "") -> None:
        self.name, self.ha_addr, self.log = name, ha_addr, log
        self.restarts: list[str] = []

    def log_since(self, mark: int, name: str = "broker.log") -> str:
        assert name == "store.log"
        return self.log[mark:]

    def stop(self) -> None:
        self.restarts.append("stop")

    def start_and_wait(self) -> None:
        self.restarts.append("start")
        self.log = ""  # a fresh start: it attaches to the new master


def brokers(stuck_log: str) -> tuple[FakeBroker, FakeBroker, FakeBroker]:
    old = FakeBroker("a-0", "127.0.0.1:10912")
    return old, FakeBroker("a-1", "127.0.0.1:10922", stuck_log), FakeBroker("a-2", "127.0.0.1:10932")


def settle(old: FakeBroker, others: list[FakeBroker], settled: Any, **kw: float) -> Any:
    all_ = cast(list[Broker], [old, *others])
    return settle_past_ha_race("the set", settled, all_, cast(Broker, old), {b.name: 0 for b in all_}, **kw)


def test_a_stuck_slave_is_restarted_once_after_its_grace_and_the_set_then_settles() -> None:
    old, stuck, fine = brokers("... HAClient: NEW: 127.0.0.1:10912 ...")
    calls = []

    def settled() -> str | None:
        calls.append(list(stuck.restarts))
        return "settled" if stuck.restarts == ["stop", "start"] else None

    assert settle(old, [stuck, fine], settled, grace=0, timeout=30) == "settled"
    assert stuck.restarts == ["stop", "start"] and fine.restarts == [] and old.restarts == []
    assert calls[0] == [] and calls[-1] == ["stop", "start"]


def test_a_set_that_settles_within_the_grace_is_left_alone() -> None:
    old, stuck, fine = brokers("NEW: 127.0.0.1:10912")
    answers = iter([None, None, "settled"])
    assert settle(old, [stuck, fine], lambda: next(answers), grace=3600, timeout=30) == "settled"
    assert stuck.restarts == [] and fine.restarts == []


def test_a_set_that_never_settles_without_the_race_fails_naming_it_and_restarts_nobody() -> None:
    old, slave, fine = brokers("NEW: 127.0.0.1:10922")  # replicating from someone else: not the race
    with pytest.raises(AssertionError, match="the set: not within 1s"):
        settle(old, [slave, fine], lambda: None, grace=0, timeout=1)
    assert slave.restarts == [] and fine.restarts == []


def test_a_slave_still_stuck_after_its_restart_is_not_restarted_again() -> None:
    old, stuck, fine = brokers("NEW: 127.0.0.1:10912")
    stuck.start_and_wait = lambda: stuck.restarts.append("start")  # type: ignore[method-assign]  # stays stuck
    with pytest.raises(AssertionError, match="the set: not within 1s"):
        settle(old, [stuck, fine], lambda: None, grace=0, timeout=1)
    assert stuck.restarts == ["stop", "start"]
