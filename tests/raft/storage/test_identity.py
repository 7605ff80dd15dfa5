"""The data directory's IDENTITY file: its format, and a node that writes it at its first start and refuses
to start on a directory whose identity names another node or group."""

from __future__ import annotations

import asyncio
import os
import struct
from json import loads as json_loads
from pathlib import Path

import msgpack
import pytest

from api.service.controller import ControllerService, ServiceOptions
from raft.node import Node
from raft.options import NodeOptions
from raft.storage.identity import (
    IDENTITY_FILE,
    DataDirIdentity,
    IdentityError,
    decode_identity,
    encode_identity,
    read_identity,
)
from raft.testing.cluster import free_ports
from raft.testing.kvnode import KvStateMachine


def test_encoding_is_the_documented_layout() -> None:
    raw = encode_identity(DataDirIdentity("g1", "127.0.0.1:9880"))
    assert raw[:4] == b"RMID" and struct.unpack_from("<HHH", raw, 4) == (1, 2, 14)
    assert raw[10:12] == b"g1" and raw[12:26] == b"127.0.0.1:9880" and len(raw) == 30
    assert decode_identity(raw, "x") == DataDirIdentity("g1", "127.0.0.1:9880")


@pytest.mark.parametrize(
    ("damage", "offset", "words"),
    [
        (lambda b: b"XMID" + b[4:], 0, "bad magic"),
        (lambda b: b[:4] + b"\x02\x00" + b[6:], 4, "version 2"),
        (lambda b: b[:-6] + b"Y" + b[-5:], 18, "CRC mismatch"),
        (lambda b: b[:-1], 6, "do not match"),
        (lambda b: b[:12], 0, "too short"),
    ],
)
def test_damage_is_named_with_file_and_offset(damage, offset: int, words: str) -> None:  # noqa: ANN001
    raw = damage(encode_identity(DataDirIdentity("g1", "node-a")))
    with pytest.raises(IdentityError) as e:
        decode_identity(raw, "/d/IDENTITY")
    assert e.value.offset == offset and e.value.path == "/d/IDENTITY"
    assert str(e.value).startswith(f"/d/IDENTITY: at byte offset {offset}: ") and words in str(e.value)


def options(data_dir: Path, node: str = "a", group: str = "g1") -> NodeOptions:
    (port,) = free_ports(1)
    return NodeOptions(node, str(data_dir), {node: ("127.0.0.1", port)}, b"secret", group_id=group)


def start_stop(opts: NodeOptions, proposals: int = 0) -> None:
    async def go() -> None:
        node = Node(opts, KvStateMachine())
        await node.start()
        try:
            if proposals:
                await node.wait_for_leader(10)
                for k in range(proposals):
                    await node.apply(msgpack.packb([f"k{k}", k]))
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(go(), 30))


def test_first_start_writes_the_identity_and_restarts_check_it(tmp_path: Path) -> None:
    d = tmp_path / "data"
    start_stop(options(d), proposals=3)
    assert read_identity(str(d)) == DataDirIdentity("g1", "a")
    before = (d / IDENTITY_FILE).stat().st_mtime_ns
    start_stop(options(d))  # the same node: starts, leaves the file alone
    assert (d / IDENTITY_FILE).stat().st_mtime_ns == before and not (d / f"{IDENTITY_FILE}.tmp").exists()


@pytest.mark.parametrize(
    ("node", "group", "names"), [("b", "g1", "node 'b' of group 'g1'"), ("a", "g2", "node 'a' of group 'g2'")]
)
def test_another_nodes_or_groups_data_is_refused(tmp_path: Path, node: str, group: str, names: str) -> None:
    d = tmp_path / "data"
    start_stop(options(d), proposals=2)
    log_before = sorted((p.name, p.stat().st_size) for p in (d / "log").iterdir())
    with pytest.raises(IdentityError) as e:
        start_stop(options(d, node, group))
    msg = str(e.value)
    assert msg.startswith(f"{d / IDENTITY_FILE}: this data directory belongs to node 'a' of group 'g1'")
    assert f"but this node is {names.replace('node ', '', 1)}" in msg and "controllerStorePath" in msg
    assert read_identity(str(d)) == DataDirIdentity("g1", "a")  # nothing written
    assert sorted((p.name, p.stat().st_size) for p in (d / "log").iterdir()) == log_before
    start_stop(options(d))  # the refusal released the directory's lock: the right node starts


def test_a_data_dir_from_before_identity_gets_one_at_its_next_start(tmp_path: Path) -> None:
    d = tmp_path / "data"
    start_stop(options(d), proposals=2)
    os.unlink(d / IDENTITY_FILE)
    start_stop(options(d))
    assert read_identity(str(d)) == DataDirIdentity("g1", "a")


def test_a_damaged_identity_refuses_the_start_with_the_fix(tmp_path: Path) -> None:
    d = tmp_path / "data"
    start_stop(options(d))
    raw = bytearray((d / IDENTITY_FILE).read_bytes())
    raw[-1] ^= 0xFF
    (d / IDENTITY_FILE).write_bytes(bytes(raw))
    with pytest.raises(IdentityError, match=r"CRC mismatch; the node will not start .* delete it"):
        start_stop(options(d))


def test_the_controller_service_writes_its_group(tmp_path: Path) -> None:
    # The group is declared once, on NodeOptions (jRaftGroupId); ServiceOptions reads it from there.
    opts = ServiceOptions(options(tmp_path / "data", group="controller-group-7"))
    assert ControllerService(opts).node.opts.group_id == "controller-group-7" == opts.group_id


def test_offline_rmqctl_verbs_read_a_data_dir_with_its_identity(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cli.rmqctl import main

    d = tmp_path / "data"
    start_stop(options(d), proposals=3)
    assert (d / IDENTITY_FILE).exists()
    for args in (["log", "info", str(d)], ["log", "info", str(d), "--copy"], ["log", "dump", str(d)]):
        r = CliRunner().invoke(main, ["-o", "json", *args])
        assert r.exit_code == 0, (args, r.output)
    doc = json_loads(CliRunner().invoke(main, ["-o", "json", "log", "info", str(d)]).stdout)
    assert doc["lastIndex"] >= 4 and doc["raftVote"] == "a"  # a leader's noop and 3 proposals
    assert read_identity(str(d)) == DataDirIdentity("g1", "a")  # the verbs leave it alone
