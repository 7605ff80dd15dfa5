"""CORRUPT: every member hashes its applied state at the same checkpoint indexes; the leader compares them
(through GET /api/v1/raft/hashes); a member whose state was damaged in memory gets the replicated alarm naming
it and the index, serves no reads, and can never be elected: with the leader stopped, the healthy member wins.
Disarmed (after an operator rebuilt it), it may campaign again."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path

import pytest

from api.service import UnavailableError, controller
from api.service.controller import state_hash
from statemachine import codes as C
from statemachine.result import Result
from tests.api.harness import NEVER_MS, Node, group, settled

pytestmark = pytest.mark.anyio
EVERY = 5


def fetch_via(nodes: list[Node]):  # noqa: ANN201 - the service's peer_hashes, through each member's HTTP route
    by_id = {n.id: n for n in nodes}

    async def fetch(peer: str) -> list[tuple[int, str]] | None:
        node = by_id[peer]
        if not node.service.started or node.service.stopping:
            return None
        env = await node.ok("GET", "/api/v1/raft/hashes", token=True)
        return [(c["index"], c["hash"]) for c in env["body"]["checkpoints"]]

    return fetch


async def write(leader: Node, nodes: list[Node], n: int, prefix: str) -> int:
    for k in range(n):
        await leader.ok("PUT", f"/api/v1/kv/ns/{prefix}{k}", json={"value": str(k)})
    index = leader.last_index()
    for node in nodes:
        if node.service.started and not node.service.stopping:
            await node.service.node.wait_applied(index, 10)
    return index


async def test_a_damaged_member_is_named_refuses_reads_and_is_never_elected(tmp_path: Path) -> None:
    async with group(tmp_path, corrupt_check_entries=EVERY, corrupt_check_interval_ms=NEVER_MS) as nodes:
        leader = await settled(nodes)
        leader.service.peer_hashes = fetch_via(nodes)
        await write(leader, nodes, 2 * EVERY, "a")
        rings = [await n.service.checkpoint_hashes() for n in nodes]
        assert rings[0] and rings[0] == rings[1] == rings[2]  # same indexes, same hashes
        assert await leader.service.check_corruption() == []

        damaged, healthy = [n for n in nodes if n is not leader]
        damaged.service.sm.kv.table["ns"]["a0"] = "flipped"  # in-memory damage: the log is intact
        await write(leader, nodes, EVERY, "b")
        assert await leader.service.check_corruption() == [damaged.id]
        [row] = (await leader.ok("GET", "/api/v1/alarms", token=True))["body"]["alarms"]
        index = max(i for i, _ in await leader.service.checkpoint_hashes())
        assert (row["alarm"], row["memberId"]) == ("CORRUPT", damaged.id)
        assert f"at index {index}; 2 of 3 members have " in row["detail"]
        await damaged.service.node.wait_applied(leader.last_index(), 10)
        assert damaged.service.corrupt() and not healthy.service.corrupt()
        with pytest.raises(UnavailableError, match="CORRUPT alarm"):
            await damaged.service.read_state(lambda now: Result(C.SUCCESS))
        assert await leader.service.check_corruption() == []  # raised once

        # Leadership handed to it is never taken; the leader goes away: only the healthy member can win.
        with pytest.raises(TimeoutError):
            await leader.service.node.transfer_leadership(damaged.id, 1.0)
        assert not damaged.service.is_leader()
        await leader.service.stop(transfer=False)
        rest = [damaged, healthy]
        for n in rest:
            n.service.peer_hashes = fetch_via(rest)
        new = await settled(rest)
        assert new is healthy
        env = await healthy.ok("POST", "/api/v1/alarms/disarm", json={"alarm": "CORRUPT"}, token=True)
        assert env["body"]["disarmed"] == [{"alarm": "CORRUPT", "memberId": damaged.id}]
        await damaged.service.node.wait_applied(healthy.last_index(), 10)
        assert not damaged.service.corrupt() and not damaged.service.node.driver.core_().suspended


async def test_every_applied_checkpoint_is_in_the_answer_and_hashed_as_release_0_3_0_did(tmp_path: Path) -> None:
    """The checkpoint's hash is computed on a hashing thread: the hashes a member answers still include every
    checkpoint it applied (the route waits for the newest), and the hash is the one release 0.3.0 computes on
    the apply thread, so that a rolling upgrade compares like with like."""
    async with group(tmp_path, corrupt_check_entries=1, corrupt_check_interval_ms=NEVER_MS) as nodes:
        leader = await settled(nodes)
        for k in range(3):
            index = await write(leader, nodes, 1, f"k{k}")
            for node in nodes:
                ring = await node.service.checkpoint_hashes()
                assert ring[-1][0] == index  # every index is a checkpoint here
                sections = sorted(node.service.sm.encode_sections().items())
                released = hashlib.sha256(
                    b"".join(t.to_bytes(2, "big") + len(b).to_bytes(8, "big") + b for t, b in sections)
                )
                assert ring[-1][1] == released.hexdigest()[:16] == state_hash(node.service.sm)


async def test_a_hash_just_done_is_in_the_answer_before_its_callback_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A future is done one loop step before its done-callbacks run. A reader asking in that step still gets
    the checkpoint. Before, the route saw the newest hash done, did not wait, and answered without it."""
    gate = threading.Event()
    real = controller.hash_sections

    def held(parts: dict[int, list[bytes]]) -> str:
        assert gate.wait(10)
        return real(parts)

    monkeypatch.setattr(controller, "hash_sections", held)
    async with group(tmp_path, corrupt_check_entries=1, corrupt_check_interval_ms=NEVER_MS) as nodes:
        leader = await settled(nodes)
        index = await write(leader, nodes, 1, "k")
        sm = leader.service.sm
        assert sm.hashing and sm.hashing[-1][0] == index  # held on the hashing thread
        newest = sm.hashing[-1][1]
        gate.set()
        while not newest.done():  # the hashing thread finishes within milliseconds
            await asyncio.sleep(0)
        ring = await leader.service.checkpoint_hashes()  # in the step the future became done
        assert ring[-1][0] == index
