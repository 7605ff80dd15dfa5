"""What applying one command returns: a RocketMQ-shaped response plus the side effects the leader must carry
out (role-change notifications). Followers compute the same value and drop it."""

from __future__ import annotations

from dataclasses import dataclass, field

from statemachine.codes import SUCCESS, code_name
from statemachine.values import JSON, JSONObject


@dataclass(frozen=True, slots=True)
class RoleChange:
    """A NOTIFY_BROKER_ROLE_CHANGED (1008) the leader should push after a successful election, to the
    members alive at the command's time. The state machine does no IO: it only says what to send."""

    cluster_name: str
    broker_name: str
    master_broker_id: int
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: tuple[int, ...]
    targets: tuple[tuple[int, str], ...]  # (brokerId, address) of every member alive at the command's time

    def header(self) -> JSONObject:
        """NotifyBrokerRoleChangedRequestHeader fields."""
        return {
            "masterAddress": self.master_address,
            "masterEpoch": self.master_epoch,
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "masterBrokerId": self.master_broker_id,
        }

    def body(self) -> JSONObject:
        """The SyncStateSet body of the notification."""
        return {"syncStateSet": list(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}

    def to_dict(self) -> JSONObject:
        return {
            "clusterName": self.cluster_name,
            "brokerName": self.broker_name,
            **self.header(),
            "syncStateSet": list(self.sync_state_set),
            "targets": [{"brokerId": i, "brokerAddress": a} for i, a in self.targets],
        }


@dataclass(frozen=True, slots=True)
class Result:
    """RocketMQ's (code, remark, header, body) for one command.

    `header` is the response header as a dict of RocketMQ's camelCase field names (None where RocketMQ
    sends no custom header); `body` is the JSON-able response body. Both map one to one onto the HTTP
    envelope (`to_envelope`). `notifications` is not part of the response: it lists what the leader should
    push to brokers because of this command (empty unless notifyBrokerRoleChanged and a master changed).
    Treat the dicts as read-only: some results are shared constants."""

    code: int
    remark: str | None = None
    header: JSONObject | None = None
    body: JSON = None
    notifications: tuple[RoleChange, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.code == SUCCESS

    @property
    def code_name(self) -> str:
        return code_name(self.code)

    def to_envelope(self) -> JSONObject:
        """The HTTP answer of docs http-api.md: {"code","codeName","remark","header","body"}."""
        return {
            "code": self.code,
            "codeName": code_name(self.code),
            "remark": self.remark,
            "header": self.header,
            "body": self.body,
        }
