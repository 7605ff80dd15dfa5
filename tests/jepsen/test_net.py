"""The test network: namespaces, bridge, nftables grudges, TCP probes, and cleanup that leaves nothing behind.

These tests make real namespaces, so they need root (the Jepsen suite does too); they fail, never skip,
when the machine cannot make them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from jepsen import net as jnet
from jepsen.net import Net, expected_matrix, list_namespaces, nft_script

ECHO = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(c.recv(100)); c.close()
"""


def ours(n: Net) -> set[str]:
    return set(list_namespaces()) & {n.switch, *n.namespaces}


def echo_from(net: Net, src: int, dst: int, port: int) -> bytes | None:
    """Send b"ping" from node src's namespace to an echo server on node dst; None when nothing answers."""
    out: list[bytes | None] = [None]

    def go() -> None:
        jnet._enter_netns(net.ns(src))
        s = socket.socket()
        s.settimeout(0.5)
        try:
            s.connect((net.addr(dst), port))
            s.sendall(b"ping")
            out[0] = s.recv(100)
        except OSError:
            out[0] = None
        finally:
            s.close()

    t = threading.Thread(target=go)
    t.start()
    t.join()
    return out[0]


def test_expected_matrix_cuts_both_directions_of_a_one_way_drop() -> None:
    assert expected_matrix(3, {1: {2}}) == [[1, 0, 1], [0, 1, 1], [1, 1, 1]]
    assert expected_matrix(2, {}) == [[1, 1], [1, 1]]


def test_nft_script_replaces_the_table_atomically() -> None:
    text = nft_script(["10.1.2.3", "10.1.2.1"])
    assert text.splitlines()[:2] == ["table inet jepsen {}", "delete table inet jepsen"]
    assert "ip saddr { 10.1.2.1, 10.1.2.3 } drop" in text
    assert nft_script([]) == "table inet jepsen {}\ndelete table inet jepsen\n"


def test_partition_is_real_and_teardown_leaves_nothing() -> None:
    net = Net(3)
    net.setup()
    echo = None
    try:
        assert ours(net) == {net.switch, *net.namespaces}
        echo = subprocess.Popen(
            ["ip", "netns", "exec", net.ns(1), sys.executable, "-c", ECHO, net.addr(1), "7777"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert echo.stdout is not None and echo.stdout.readline().strip() == "listening"
        assert echo_from(net, 2, 1, 7777) == b"ping"
        assert net.probe(7777).ok

        net.apply_grudge({1: {2}})  # one-way: n1 drops n2
        assert echo_from(net, 2, 1, 7777) is None
        assert echo_from(net, 3, 1, 7777) == b"ping"
        res = net.probe(7777)
        assert res.ok and res.actual == [[1, 0, 1], [0, 1, 1], [1, 1, 1]] and res.control == [1, 1, 1]
        assert net.addr(2) in net.rules(1) and net.rules(2) == ""

        net.heal()
        assert echo_from(net, 2, 1, 7777) == b"ping"
        assert net.probe(7777).actual == [[1] * 3] * 3
    finally:
        if echo is not None:
            echo.kill()
            echo.wait()
        assert net.teardown() == []
    assert ours(net) == set()
    assert not os.path.exists(f"/sys/class/net/{net.ctl_link}")
    assert not os.path.exists(os.path.join(jnet.RESERVATIONS, f"{net.tag}.json"))
    assert net.teardown() == []  # idempotent


def test_probe_notices_a_partition_that_is_not_in_effect() -> None:
    with Net(2) as net:
        net.grudge = {1: {2}}  # what the nemesis believes, without the rules
        res = net.probe(9)
        assert not res.ok and res.expected != res.actual


def test_two_runs_get_distinct_names_and_subnets() -> None:
    with Net(2) as a, Net(2) as b:
        assert a.prefix != b.prefix and a.tag != b.tag
        assert not set(a.namespaces) & set(b.namespaces)
        assert a.probe(9).ok and b.probe(9).ok


def test_a_killed_owner_is_cleaned_up_by_the_next_run() -> None:
    code = "from jepsen.net import Net; import sys; n = Net(2); n.setup(); print(n.tag, flush=True); sys.stdin.read()"
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    assert p.stdout is not None
    tag = p.stdout.readline().strip()
    assert tag, "the child could not set up its network"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert any(ns.startswith(f"jp{tag}") for ns in list_namespaces())
    assert tag in jnet.reclaim_stale()
    assert not any(ns.startswith(f"jp{tag}") for ns in list_namespaces())
    assert not os.path.exists(os.path.join(jnet.RESERVATIONS, f"{tag}.json"))


def test_a_grudge_naming_an_unknown_node_is_refused() -> None:
    with Net(2) as net, pytest.raises(ValueError):
        net.apply_grudge({1: {3}})


def test_reservation_records_its_owner() -> None:
    with Net(1) as net:
        with open(os.path.join(jnet.RESERVATIONS, f"{net.tag}.json")) as f:
            r = json.load(f)
        assert r["pid"] == os.getpid() and r["prefix"] == net.prefix and net.ns(1) in r["namespaces"]
