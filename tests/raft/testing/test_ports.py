"""The explicit ports every test and local cluster binds (raft/testing/cluster.py): below the kernel's ephemeral
range, in this pytest-xdist worker's own block, never handed out twice by one process, and free when chosen."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator

import pytest

from raft.testing import cluster
from raft.testing.cluster import ephemeral_low, free_port_base, free_ports


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(cluster, "_handed", set())
    for name in ("TEST_PORT_BLOCKS", "TEST_PORT_BLOCK"):  # `make test` sets them; each test here sets its own
        monkeypatch.delenv(name, raising=False)
    state = random.getstate()
    random.seed(7)
    yield
    random.setstate(state)


def test_ports_are_below_the_ephemeral_range_and_never_handed_twice() -> None:
    ports = free_ports(400)
    assert len(set(ports)) == 400
    assert all(cluster.PORTS_LOW <= p < ephemeral_low() for p in ports)


def test_each_xdist_worker_chooses_in_its_own_block(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
        monkeypatch.setattr(cluster, "_handed", set())
        seen[worker] = {free_port_base((-2, 0, 1)) + o for _ in range(200) for o in (-2, 0, 1)}
    middle = cluster.PORTS_LOW + (ephemeral_low() - cluster.PORTS_LOW) // 2
    assert max(seen["gw0"]) < middle <= min(seen["gw1"])


def test_two_runs_at_once_choose_in_blocks_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Makefile's two pytest runs at once: the offline one's 3 workers and the ALONGSIDE file's run (no
    xdist) split the range in 4 (TEST_PORT_BLOCKS=4, TEST_PORT_BLOCK=3 for the latter): no block is shared."""
    monkeypatch.setenv("TEST_PORT_BLOCKS", "4")
    size = (ephemeral_low() - cluster.PORTS_LOW) // 4
    seen = {}
    for worker in ("gw0", "gw1", "gw2", "alongside"):
        if worker == "alongside":
            monkeypatch.delenv("PYTEST_XDIST_WORKER")
            monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
            monkeypatch.setenv("TEST_PORT_BLOCK", "3")
        else:
            monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
            monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
        monkeypatch.setattr(cluster, "_handed", set())
        seen[worker] = {free_port_base((-2, 0, 1)) + o for _ in range(100) for o in (-2, 0, 1)}
    for i, worker in enumerate(("gw0", "gw1", "gw2", "alongside")):
        lo = cluster.PORTS_LOW + i * size
        assert lo <= min(seen[worker]) and max(seen[worker]) < lo + size, (worker, min(seen[worker]), lo)


def free_triple() -> int:
    """A port p with p - 1, p and p + 1 free."""
    p = free_port_base((-1, 0, 1))
    cluster._handed.clear()
    return p


def test_a_bound_port_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_triple()
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # the whole range of 3 is this process's
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        # three ports, the middle one bound: the two others, once each
        got = [free_port_base((0,), low=port - 1, high=port + 2) for _ in range(2)]
        assert sorted(got) == [port - 1, port + 1]
        cluster._handed.clear()
        with pytest.raises(RuntimeError, match="no free port range"):  # a range of just the bound port
            free_port_base((0,), low=port, high=port + 1)


def test_a_family_is_free_at_every_offset() -> None:
    base = free_port_base((-2, 0, 1, 1000))
    for o in (-2, 0, 1, 1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", base + o))


def test_a_family_is_checked_and_recorded_whole_and_never_meets_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """Until 2026-11-30 the base was drawn anew for every offset: only the last offset's port of the family
    returned had been checked and recorded, so a broker's listen port (port_triples) could be a port the same
    process had handed to a RocketMQ controller a moment before (a fresh clone's run: `Failed to bind to
    0.0.0.0:31011`, the JRaft controller's raft port)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # the whole range: 600 ports stay below half of it
    taken: set[int] = set()
    for _ in range(200):
        base = free_port_base((-2, 0, 1))
        family = {base + o for o in (-2, 0, 1)}
        assert family <= cluster._handed and not family & taken, (family, sorted(taken & family))
        taken |= family
