"""A broker heartbeat (904) on the remoting listener is answered without a task (api/remoting/server.py,
`Dispatcher.answer_soon`): proposed at once and answered from the proposal future's done-callback. Its answer
must be the task path's (`Dispatcher.answer`) byte for byte, with the same metrics, for every outcome a
heartbeat can meet: applied, refused before consensus, a malformed field, a follower's 2007, a commit timeout,
a Raft error, and a cancelled proposal (no answer). On a real one-node ControllerService; the failing outcomes
come from its node's `apply` returning a future that already holds them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.client import RemotingClient
from api.remoting.codec import RemotingCommand
from api.remoting.server import Dispatcher, RemotingServer
from api.service import ControllerService
from api.service.controller import CommitTimeout
from api.service.metrics import ControllerMetrics
from raft.status import RaftError, RaftException
from statemachine import codes as C
from tests.api.harness import SETTINGS, Node, solo

pytestmark = pytest.mark.anyio

GOOD = {"clusterName": "c", "brokerName": "b", "brokerAddr": "127.0.0.1:10911", "brokerId": "1", "epoch": "0"}


@pytest.fixture(params=[1, 2], ids=["level-1", "level-2"])
async def node(anyio_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Node]:
    """At feature level 1 (each heartbeat its own 1018, from the typed request) and 2 (batched, and a plain
    header decoded straight into its item: api/remoting/headers.heartbeat_item)."""
    async with solo(tmp_path) as n:
        if request.param == 2:
            assert (await n.service.raise_feature_level()).ok and n.service.sm.features.level == 2
        yield n


def dispatcher(service: ControllerService) -> Dispatcher:
    return Dispatcher(service, SETTINGS, ControllerMetrics(service, {}))


async def by_callback(d: Dispatcher, cmd: RemotingCommand) -> tuple[bytes | None, bool]:
    """`answer_soon`'s reply (a frame), and whether it came later from a task (it must not: at once, or from a
    callback)."""
    got: asyncio.Future[tuple[bytes | None, bool]] = asyncio.get_running_loop().create_future()
    returned = False
    assert d.answer_soon(cmd, lambda r: got.set_result((r, returned and asyncio.current_task() is not None)))
    returned = True
    return await got


async def by_task(d: Dispatcher, cmd: RemotingCommand) -> RemotingCommand | None:
    try:
        return await d.answer(cmd)
    except asyncio.CancelledError:  # the proposal was cancelled: the task path answers nothing
        return None


def heartbeat(fields: dict[str, str], opaque: int = 7) -> RemotingCommand:
    return RemotingCommand(H.BROKER_HEARTBEAT, opaque=opaque, ext_fields=fields)


async def same_answer(service: ControllerService, fields: dict[str, str]) -> RemotingCommand | None:
    """Both paths' answers to the same heartbeat, checked equal (frames and metrics); the answer."""
    fast, slow = dispatcher(service), dispatcher(service)
    answer, in_task = await by_callback(fast, heartbeat(fields))
    assert not in_task, "answered later from a task"
    expected = await by_task(slow, heartbeat(fields))
    assert answer == (None if expected is None else codec.encode(expected))
    assert fast.metrics is not None and slow.metrics is not None
    assert dict(fast.metrics.requests) == dict(slow.metrics.requests)
    assert sum(fast.metrics.requests.values()) == 1
    return expected


def proposals_end_with(node: Node, monkeypatch: pytest.MonkeyPatch, end: Callable[[asyncio.Future[Any]], None]) -> None:
    """Every proposal's future is returned already ended by `end` (nothing reaches the log)."""

    def apply(data: bytes) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        end(fut)
        return fut

    monkeypatch.setattr(node.service.node, "apply", apply)


async def test_an_applied_heartbeat(node: Node) -> None:
    answer = await same_answer(node.service, GOOD)
    assert answer is not None and answer.code == C.SUCCESS and answer.remark == "Heart beat success"


@pytest.mark.parametrize(
    ("fields", "code", "remark"),
    [
        ({k: v for k, v in GOOD.items() if k != "brokerId"}, C.CONTROLLER_INVALID_REQUEST, "empty brokerId"),
        (GOOD | {"brokerId": "one"}, C.SYSTEM_ERROR, "brokerId"),
        ({k: v for k, v in GOOD.items() if k != "brokerAddr"}, C.SYSTEM_ERROR, "brokerAddr"),
    ],
    ids=["refused", "malformed", "missing"],
)
async def test_refused_before_consensus(node: Node, fields: dict[str, str], code: int, remark: str) -> None:
    before = node.service.node.status().last_index
    answer = await same_answer(node.service, fields)
    assert answer is not None and answer.code == code and remark in (answer.remark or ""), answer
    assert node.service.node.status().last_index == before  # nothing proposed


@pytest.mark.parametrize(
    ("end", "code", "remark"),
    [
        (lambda f: f.set_exception(CommitTimeout()), C.SYSTEM_ERROR, "unavailable: not committed within"),
        (lambda f: f.set_exception(RaftException(RaftError.EPERM, "not leader")), C.CONTROLLER_NOT_LEADER, ""),
        (lambda f: f.set_exception(ValueError("a bug")), C.SYSTEM_ERROR, "ValueError: a bug"),
        (lambda f: f.cancel(), None, None),
    ],
    ids=["commit-timeout", "raft-error", "bug", "cancelled"],
)
async def test_a_proposal_that_fails(
    node: Node, monkeypatch: pytest.MonkeyPatch, end: Callable[[asyncio.Future[Any]], None], code: int, remark: str
) -> None:
    proposals_end_with(node, monkeypatch, end)
    answer = await same_answer(node.service, GOOD)
    if code is None:
        assert answer is None
    else:
        assert answer is not None and answer.code == code and remark in (answer.remark or ""), answer


async def test_on_a_node_that_does_not_lead(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node.service.node, "is_leader", lambda: False)
    answer = await same_answer(node.service, GOOD)
    assert answer is not None and answer.code == C.CONTROLLER_NOT_LEADER


async def test_the_listener_answers_heartbeats_without_the_task_path(node: Node) -> None:
    server = RemotingServer(node.service, SETTINGS, ("127.0.0.1", 0))

    async def no_task(*_: object) -> RemotingCommand:
        raise AssertionError("a heartbeat took the task path")

    server.dispatcher.answer = no_task  # type: ignore[method-assign,assignment]
    await server.start()
    try:
        client = await RemotingClient.connect("127.0.0.1", server.port)
        try:
            answers = await asyncio.gather(*(client.request(H.BROKER_HEARTBEAT, GOOD, timeout=10) for _ in range(5)))
        finally:
            client.close()
        assert [(a.code, a.remark) for a in answers] == [(C.SUCCESS, "Heart beat success")] * 5
    finally:
        await server.stop()


async def test_heartbeats_sharing_an_entry_each_get_their_own_answer(node: Node) -> None:
    """Heartbeats proposed in one loop turn share one entry and are answered from its outcome read once: each
    answer must still be its own (opaque, serialization, none for a oneway one) and byte for byte the task
    path's, each heartbeat counted, and the service's listeners told once per proposal (the batch's entry)."""
    fast, slow = dispatcher(node.service), dispatcher(node.service)
    heard: list[tuple[str, int]] = []
    node.service.listeners.append(lambda kind, result: heard.append((kind, result.code)))
    cmds = [
        RemotingCommand(
            H.BROKER_HEARTBEAT,
            opaque=opaque,
            flag=codec.ONEWAY_FLAG if opaque in (3, 12) else 0,
            ext_fields=GOOD | {"brokerId": str(i % 3 + 1)},
            serialize_type=codec.ROCKETMQ if opaque % 2 else codec.JSON,
        )
        for i, opaque in enumerate([10, 3, 11, -(2**31), 2**31 - 1, 7, 0, 12])
    ]
    before = node.service.node.status().last_index
    loop = asyncio.get_running_loop()
    replies = [loop.create_future() for _ in cmds]
    for cmd, reply in zip(cmds, replies, strict=True):
        assert fast.answer_soon(cmd, reply.set_result)
    answers = await asyncio.gather(*replies)
    batched = node.service.sm.features.level >= 2
    assert node.service.node.status().last_index == before + (1 if batched else len(cmds))
    assert len(heard) == (1 if batched else len(cmds))
    for cmd, answer in zip(cmds, answers, strict=True):
        expected = await by_task(slow, cmd)
        assert expected is not None and expected.code == C.SUCCESS
        assert answer == (None if cmd.is_oneway else codec.encode(expected)), cmd
    assert fast.metrics is not None and slow.metrics is not None
    assert dict(fast.metrics.requests) == dict(slow.metrics.requests)
    assert fast.metrics.latency["CONTROLLER_BROKER_HEARTBEAT"].total == len(cmds)
