"""A RocketMQ 5 broker's requests to the controller (ReplicasManager's side), shared by `rmqctl broker run`
(one broker, synchronous, at human speed) and the replica-group simulator `tools.brokersim` (many brokers on
one asyncio loop).

The bodies are those of docs/http.md's broker endpoints; the registration is a generator of requests (path,
body) that is sent the `Reply` of each one, so that the same steps run over a blocking or an async client:

    steps = registration(cluster, name, address, known_id, check_code(address, now_ms))
    broker_id, reply = run_steps(steps, lambda path, body: client.post(f"{API}/{path}", body))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator

from cli.rmqctl.client import Reply
from statemachine import codes as C
from statemachine.values import JSON, JSONObject

API = "/api/v1/controller"

Step = tuple[str, JSONObject]  # (path under API, JSON body)
Steps = Generator[Step, Reply, tuple[int, Reply]]


def check_code(address: str, now_ms: int) -> str:
    """RocketMQ's registerCheckCode: "<address>;<timestamp ms>" (the controller keeps the address part)."""
    return f"{address};{now_ms}"


def registration(
    cluster: str, name: str, address: str, broker_id: int | None, code: str, applied: bool = True
) -> Steps:
    """The three-step registration (spec §8). With a known `broker_id` (a restarted broker's persisted id):
    register at once, and apply the id first only when the controller answers 2010 (it does not know it);
    with `applied=False` (RocketMQ's temp file: an id chosen but not yet applied) apply it first, with the
    same `code` (idempotent). Without one: next-broker-id, apply-broker-id with `code`, register-broker.
    Returns (id, the register answer); raises `Failed` (cli.rmqctl) naming the step the controller refused."""
    ids = {"clusterName": cluster, "brokerName": name}
    if broker_id is not None and applied:
        reply = yield "register-broker", {**ids, "brokerId": broker_id, "brokerAddress": address}
        if reply.code != C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED:
            return _registered(broker_id, reply)
    elif broker_id is None:
        reply = yield "next-broker-id", ids
        if not reply.ok:
            raise reply.failure("next-broker-id")
        broker_id = int(reply.header["nextBrokerId"])
    reply = yield "apply-broker-id", {**ids, "appliedBrokerId": broker_id, "registerCheckCode": code}
    if not reply.ok:
        raise reply.failure(f"apply-broker-id {broker_id}")
    reply = yield "register-broker", {**ids, "brokerId": broker_id, "brokerAddress": address}
    return _registered(broker_id, reply)


def _registered(broker_id: int, reply: Reply) -> tuple[int, Reply]:
    if not reply.ok:
        raise reply.failure(f"register-broker {broker_id}")
    return broker_id, reply


def run_steps(steps: Steps, post: Callable[[str, JSONObject], Reply]) -> tuple[int, Reply]:
    """Drive `steps` with a blocking `post(path, body) -> Reply`."""
    try:
        step = next(steps)
        while True:
            step = steps.send(post(*step))
    except StopIteration as done:
        return done.value


async def arun_steps(steps: Steps, post: Callable[[str, JSONObject], Awaitable[Reply]]) -> tuple[int, Reply]:
    """Drive `steps` with an async `post(path, body) -> Reply`."""
    try:
        step = next(steps)
        while True:
            step = steps.send(await post(*step))
    except StopIteration as done:
        return done.value


def heartbeat(
    cluster: str,
    name: str,
    address: str,
    broker_id: int | None,
    timeout_ms: int,
    epoch: int | None = None,
    max_offset: int | None = None,
    confirm_offset: int | None = None,
) -> Step:
    """904 BROKER_HEARTBEAT; the progress fields are left out (RocketMQ's -1 defaults) when not given."""
    body: JSONObject = {
        "clusterName": cluster,
        "brokerName": name,
        "brokerAddr": address,
        "brokerId": broker_id,
        "heartbeatTimeoutMills": timeout_ms,
    }
    for key, value in (("epoch", epoch), ("maxOffset", max_offset), ("confirmOffset", confirm_offset)):
        if value is not None:
            body[key] = value
    return "heartbeat", body


def replica_info(name: str) -> Step:
    return "replica-info", {"brokerName": name}


def elect_self(cluster: str, name: str, broker_id: int | None) -> Step:
    """1002, broker trigger: elect myself (SUCCESS, or 2011 while another master is alive)."""
    return "elect-master", {"clusterName": cluster, "brokerName": name, "brokerId": broker_id}


def alter_sync_state_set(
    name: str, master_id: int | None, master_epoch: JSON, new_set: list[int], set_epoch: JSON
) -> Step:
    """1001, from the master: replace the SyncStateSet (fenced by the master epoch and the set's epoch)."""
    return "alter-sync-state-set", {
        "brokerName": name,
        "masterBrokerId": master_id,
        "masterEpoch": master_epoch,
        "syncStateSet": {"syncStateSet": new_set, "syncStateSetEpoch": set_epoch},
    }


def master_of(info: Reply) -> tuple[JSON, JSON, list[int], JSON]:
    """(masterBrokerId, masterEpoch, SyncStateSet, syncStateSetEpoch) of a replica-info answer."""
    body = info.body or {}
    return (
        info.header.get("masterBrokerId"),
        info.header.get("masterEpoch"),
        list(body.get("syncStateSet") or []),
        body.get("syncStateSetEpoch"),
    )
