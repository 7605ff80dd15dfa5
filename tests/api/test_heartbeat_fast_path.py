"""A broker's heartbeat decoded straight from its extFields into the 1202 item (api/remoting/headers.py,
`heartbeat_item`), with no dict of typed fields and no request object: whenever it gives an item, the item is the
generic path's (`parse`, the typed BrokerHeartbeat, `commands.heartbeat_item`) value for value and type for type,
and it gives one for every header a Java broker sends. The remoting listener takes it from feature level 2, and
below that (or under an alarm) the typed request as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from api.remoting import headers as H
from api.remoting.client import RemotingClient
from api.remoting.server import RemotingServer
from api.service import requests as Q
from api.service.controller import HEARTBEATS_LEVEL
from api.service.requests import command_fields
from statemachine import codes as C
from statemachine import commands, features
from statemachine.commands import CommandError
from tests.api.harness import SETTINGS, Node, solo
from tests.api.test_heartbeat_batching import recording

NAMES = [name for name, _, _ in H.REQUEST[H.BROKER_HEARTBEAT]]
KINDS = {name: kind for name, kind, _ in H.REQUEST[H.BROKER_HEARTBEAT]}
LONG_MAX, INT_MAX = 2**63 - 1, 2**31 - 1

# Texts near every edge of the Java parse: signs, spaces, empty, out of range, digits that are not ASCII.
EDGES = [
    *"0 -0 1 -1 +1 --1 -+1 - 1_0 0x10 1.0 007".split(),
    *(" 1", "1 ", "", "\u0661", "\uff11", "\u00b2"),
    *map(str, (LONG_MAX, -LONG_MAX - 1, LONG_MAX + 1, INT_MAX, INT_MAX + 1, -INT_MAX - 1)),
    *("9" * 9, "9" * 10, "9" * 18, "9" * 19, "-" + "9" * 18, "-" + "9" * 19),
]
ABSENT = object()


def generic(ext: dict[str, str]) -> object:
    """What the generic path makes of the header: the item, the refusal, or the error's type."""
    try:
        request = Q.of(Q.BrokerHeartbeat, H.parse(H.REQUEST[H.BROKER_HEARTBEAT], ext))
        refusal = request.refusal()
        if refusal is not None:
            return ("refused", refusal.code)
        return commands.heartbeat_item(command_fields(request))
    except (H.HeaderFieldError, CommandError) as e:
        return ("error", type(e).__name__)


def typed(item: object) -> object:
    return [(type(v).__name__, v) for v in item] if isinstance(item, list) else item


anything = st.one_of(st.just(ABSENT), st.sampled_from(EDGES), st.text(max_size=6), st.integers().map(str))


def java_number(name: str) -> st.SearchStrategy[str]:
    """Long.toString / Integer.toString of any value a Java broker can send that the fast path takes whole."""
    bound = 10**18 - 1 if KINDS[name] == H.LONG else 10**9 - 1
    return st.integers(-bound, bound).map(str)


REQUIRED = ("clusterName", "brokerAddr", "brokerName", "brokerId")  # brokerId: left out, RocketMQ refuses it
java_header = st.fixed_dictionaries(
    {name: st.text(max_size=20) if KINDS[name] == H.STRING else java_number(name) for name in REQUIRED},
    # a field the broker left null is not on the wire: the fast path fills in RocketMQ's default
    optional={name: java_number(name) for name in NAMES if name not in REQUIRED},
)


@settings(max_examples=200, deadline=None)
@given(java_header)
def test_every_header_a_java_broker_sends_takes_the_fast_path(header: dict[str, str]) -> None:
    fast = H.heartbeat_item(header)
    assert fast is not None, header
    assert typed(fast) == typed(generic(header))


@settings(max_examples=600, deadline=None)
@given(java_header, st.dictionaries(st.sampled_from(NAMES), anything, max_size=2))
@example(dict.fromkeys(NAMES, "1"), {"maxOffset": "9" * 19})
@example(dict.fromkeys(NAMES, "1"), {"epoch": "-1"})
@example(dict.fromkeys(NAMES, "1"), {"epoch": " 1"})  # JSON takes the space, Integer.parseInt does not
@example(dict.fromkeys(NAMES, "1"), {"electionPriority": "1\n"})
@example(dict.fromkeys(NAMES, "1"), {"maxOffset": "1,2", "epoch": ABSENT})  # one field holding two numbers
@example(dict.fromkeys(NAMES, "1"), {"brokerId": "01"})  # a leading zero: not JSON, the generic path's
@example(dict.fromkeys(NAMES, "1"), {"electionPriority": "2147483648"})  # one past Integer.MAX_VALUE
@example(dict.fromkeys(NAMES, "1"), {"brokerId": "1e3"})
def test_whenever_the_fast_path_gives_an_item_it_is_the_generic_paths(
    header: dict[str, str], odd: dict[str, object]
) -> None:
    """A Java broker's header with one or two fields anything at all (left out, signed, spaced, out of range,
    digits that are not ASCII, any text): the fast path's item, if any, is the generic path's."""
    ext = {k: v for k, v in (header | odd).items() if v is not ABSENT}
    fast = H.heartbeat_item(ext)  # type: ignore[arg-type]
    if fast is not None:
        assert typed(fast) == typed(generic(ext)), ext  # type: ignore[arg-type]


@pytest.fixture
async def node(anyio_backend: str, tmp_path: Path) -> AsyncIterator[Node]:
    async with solo(tmp_path) as n:
        yield n


GOOD = {"clusterName": "c", "brokerName": "b", "brokerAddr": "127.0.0.1:10911", "brokerId": "1", "epoch": "0"}


async def heartbeats_over_remoting(node: Node, headers: list[dict[str, str]]) -> list[tuple[int, str | None]]:
    server = RemotingServer(node.service, SETTINGS, ("127.0.0.1", 0))
    await server.start()
    try:
        client = await RemotingClient.connect("127.0.0.1", server.port)
        try:
            answers = [await client.request(H.BROKER_HEARTBEAT, h, timeout=10) for h in headers]
        finally:
            client.close()
    finally:
        await server.stop()
    return [(a.code, a.remark) for a in answers]


def typed_requests(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """Every typed request the listener builds from now on, by class."""
    built: list[type] = []
    of = Q.of

    def spy(cls: type, values: object) -> object:
        built.append(cls)
        return of(cls, values)  # type: ignore[arg-type]

    monkeypatch.setattr(Q, "of", spy)
    return built


@pytest.mark.anyio
async def test_from_level_2_the_listener_proposes_a_plain_heartbeat_without_a_typed_request(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = node.service
    assert (await service.raise_feature_level()).ok and service.sm.features.level == features.MAX_LEVEL
    built = typed_requests(monkeypatch)
    seen = recording(node)
    got = await heartbeats_over_remoting(node, [GOOD, GOOD | {"brokerId": "+1"}, {**GOOD, "brokerId": "one"}])
    assert got[:2] == [(C.SUCCESS, "Heart beat success")] * 2
    assert got[2][0] == C.SYSTEM_ERROR and "brokerId" in (got[2][1] or "")
    # the plain one went straight to the batch, the signed one through the typed request, and the malformed one
    # was refused while its header was parsed, before any request was built
    assert built == [Q.BrokerHeartbeat]
    # one at a time, so each turn held one: two 1018s, each with the item the generic path makes
    assert [e[1] for e in seen] == [C.BROKER_HEARTBEAT] * 2
    assert seen[0][3:] == seen[1][3:] == generic(GOOD)


@pytest.mark.anyio
async def test_below_level_2_the_listener_builds_the_typed_request(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    assert node.service.sm.features.level < HEARTBEATS_LEVEL
    built = typed_requests(monkeypatch)
    assert await heartbeats_over_remoting(node, [GOOD]) == [(C.SUCCESS, "Heart beat success")]
    assert built == [Q.BrokerHeartbeat]


@pytest.mark.anyio
async def test_under_an_alarm_the_listener_refuses_an_unknown_brokers_plain_heartbeat(node: Node) -> None:
    """NOSPACE refuses heartbeats of brokers the live table does not hold, one by one: a plain header must not
    slip past that into the batch."""
    service = node.service
    assert (await service.raise_feature_level()).ok and service.sm.features.level == features.MAX_LEVEL
    # known: in the live table (not over remoting, whose connection's close would take it out again)
    assert (await service.submit(Q.of(Q.BrokerHeartbeat, H.parse(H.REQUEST[H.BROKER_HEARTBEAT], GOOD)))).ok
    assert (await service.raise_alarm("NOSPACE", "store full")).ok
    seen = recording(node)
    got = await heartbeats_over_remoting(node, [GOOD, GOOD | {"brokerId": "2", "brokerAddr": "127.0.0.1:10912"}])
    assert got[0] == (C.SUCCESS, "Heart beat success")
    assert got[1][0] == C.SYSTEM_ERROR and "NOSPACE" in (got[1][1] or ""), got
    assert [e[1] for e in seen] == [C.BROKER_HEARTBEAT]
