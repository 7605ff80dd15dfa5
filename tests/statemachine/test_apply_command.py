"""Fast paths against the general rules they stand for, on seeded random streams of valid and subtly
malformed commands:
  * `apply_command` (a command msgpack already decoded, as the audit's replay feeds it from a
    msgpack.Unpacker over a buffer of commands) against `apply` (one command's bytes, as the Raft node
    applies them): the same answer at every step, byte-identical sections at the end;
  * the scan's needs-re-election lookup (an entry left after expiry is alive) against the rule with
    liveness judged by time (`is_alive`), and its one-pass expiry against the expiry rule, at every scan
    of the stream, with and without a floor (aliveSinceMillis)."""

from __future__ import annotations

import random

import msgpack
import pytest

from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine import commands as cmd
from statemachine.liveness import LAST, TIMEOUT
from tests.statemachine.harness import tables

T0 = 1_700_000_000_000
NAMES = [f"set-{k}" for k in range(6)]


def _command(rng: random.Random, now: int) -> bytes:
    name, bid = rng.choice(NAMES), rng.randint(1, 4)
    addr = f"10.0.0.{bid}:{10911 + NAMES.index(name)}"
    kind = rng.random()
    if kind < 0.55:
        return cmd.heartbeat(
            now,
            "c",
            name,
            addr,
            bid,
            epoch=rng.randint(0, 3),
            max_offset=rng.randint(0, 9),
            heartbeat_timeout_millis=rng.choice([3_000, 10_000]),
        )
    if kind < 0.65:
        return cmd.register_broker(now, "c", name, bid, addr)
    if kind < 0.70:
        return cmd.apply_broker_id(now, "c", name, bid, f"code-{name}-{bid}")
    if kind < 0.76:
        return cmd.elect_master(now, name, cluster_name="c", broker_id=rng.choice([-1, bid]))
    if kind < 0.82:
        members = sorted(rng.sample(range(1, 5), rng.randint(1, 3)))
        return cmd.alter_sync_state_set(now, name, rng.randint(1, 4), rng.randint(0, 3), members, rng.randint(0, 3))
    if kind < 0.86:  # without a floor, or a new leader's (aliveSinceMillis), now and then after `now`
        return cmd.check_not_active_broker(now, rng.choice([None, None, now - 2_000, now - 6_000, now + 1_000]))
    if kind < 0.89:
        return cmd.close_channel(now, "c", name, bid)
    if kind < 0.92:
        return cmd.kv_put(now, "ns", f"k{bid}", str(now))
    if kind < 0.93:
        return cmd.clean_broker_data(now, name, cluster_name="c", broker_controller_ids_to_clean=str(bid))
    if kind < 0.94:
        return cmd.update_controller_config(now, {"enableElectUncleanMaster": rng.random() < 0.5})
    if kind < 0.95:
        return cmd.get_sync_state_data(now, [name])
    return _malformed(rng, cmd.heartbeat(now, "c", name, addr, bid))


def _malformed(rng: random.Random, good: bytes) -> bytes:
    """A heartbeat with one thing wrong: what must leave the fast path and be refused by the general one."""
    c = msgpack.unpackb(good)
    how = rng.randrange(6)
    if how == 0:
        c[6] = True  # brokerId a bool: equal to 1, not an int
    elif how == 1:
        c[2] = float(c[2])  # timeMillis a float
    elif how == 2:
        c[0] = 2  # an unknown format version
    elif how == 3:
        c.append(0)  # one field too many
    elif how == 4:
        c[1] = float(C.BROKER_HEARTBEAT)  # the code a float, equal to 1018
    else:
        c[4] = c[4].encode()  # brokerName as bytes
    return msgpack.packb(c, use_bin_type=True)


def _stream(seed: int, n: int = 3_000) -> list[bytes]:
    rng = random.Random(seed)
    now, log = T0, []
    for _ in range(n):
        now += rng.choice([0, 1, 50, 1_000, 4_000])
        log.append(_command(rng, now - rng.choice([0, 0, 0, 2_000])))  # now and then a leader clock behind
    return log


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_apply_command_on_unpacked_stream_equals_apply_on_bytes(seed: int) -> None:
    log = _stream(seed)
    by_bytes, by_command = ControllerStateMachine(), ControllerStateMachine()
    unpacker = msgpack.Unpacker()
    unpacker.feed(b"".join(log))
    answers: dict[int, int] = {}
    for data, c in zip(log, unpacker, strict=True):
        a, b = by_bytes.apply(data), by_command.apply_command(c)
        assert a == b, (data, a, b)
        answers[a.code] = answers.get(a.code, 0) + 1
    assert answers[C.CONTROLLER_JRAFT_INTERNAL_ERROR] > 50  # the malformed ones reached the general refusal
    assert answers[C.SUCCESS] > 1_500 and by_bytes.replicas.sets and by_bytes.live.table  # and state was built
    assert tables(by_bytes) == tables(by_command)
    assert by_bytes.clock_ms == by_command.clock_ms


@pytest.mark.parametrize("seed", [4, 5])
def test_scan_needs_reelection_lookup_equals_the_rule_by_time(seed: int) -> None:
    sm, checked, found, expired, held = ControllerStateMachine(), 0, 0, 0, 0
    for data in _stream(seed):
        c = msgpack.unpackb(data)
        if c[1] == C.CHECK_NOT_ACTIVE_BROKER:
            t = max(c[2], sm.clock_ms)
            since = c[3] if len(c) > 3 and c[3] <= t else None  # a floor after the scan's time is ignored
            live, m = sm.live, sm.manager
            by_time = sorted(
                name
                for name, state in m.sync.sets.items()
                if state.master_broker_id is not None
                and m.contains(name)
                and not live.is_alive(state.cluster_name, name, state.master_broker_id, t, since)
                and any(live.is_alive(state.cluster_name, name, b, t, since) for b in m.replicas.sets[name].brokers)
            )
            copy = ControllerStateMachine()
            copy.load_sections(sm.encode_sections())
            copy.live.expire(t, since)
            assert copy.heartbeats._needing_reelection() == by_time
            checked, found = checked + 1, found + len(by_time)
            floor = -1 if since is None else since
            gone = sorted(k for k, r in live.table.items() if t - max(r[LAST], floor) > r[TIMEOUT])
            held += len([k for k, r in live.table.items() if t - r[LAST] > r[TIMEOUT]]) - len(gone)
            assert sm.scan_needed(c[2], c[3] if len(c) > 3 else None) >= bool(gone)
            body = sm.apply(data).body
            assert body["aliveSinceMillis"] == since
            assert [(b["clusterName"], b["brokerName"], b["brokerId"]) for b in body["inactiveBrokers"]] == gone
            expired += len(gone)
        else:
            sm.apply(data)
        assert sm.live.deadline_floor <= sm.live._floor()  # a lower bound of every deadline, always
    assert checked > 50 and found > 0 and expired > 0  # scans ran, found sets to re-elect and expired brokers
    assert held > 0  # and floors kept brokers that their last heartbeat alone would have expired
