"""The replicated half of RocketMQ's RaftBrokerHeartBeatManager: close-channel (1014), the inactive-broker
scan (1015) with the re-elections it drives, and live-info lookups (1016). Heartbeats (1018) merge in
liveness.py.

Re-election, decided inside the scan entry rather than by follow-up requests from the leader, so that one
entry carries the whole decision and every replica reaches it (spec §6):
  * a set is triggered when its master's entry expires in this scan, when the set matches the INTENDED
    "needs re-election" rule (master set, master not alive, at least one registered replica alive; RocketMQ's
    jRaft code passes an inverted predicate, ISSUE #8380), or when it still owes retries;
  * each triggered set gets one controller-triggered electMaster at the scan's time. RocketMQ retries up to
    electMasterMaxRetryCount times while the result is not SUCCESS, each retry a later request; retrying
    inside one entry could only repeat the same answer, so a failed attempt (2004) leaves the remaining
    retries in the replicated state and the next scans spend them, at their own times. As in RocketMQ, every
    failed attempt bumps masterEpoch once.
"""

from __future__ import annotations

from typing import Any

from statemachine import codes as C
from statemachine.liveness import BrokerLiveTable, row_json
from statemachine.manager import ReplicasInfoManager
from statemachine.result import Result, RoleChange

TRIGGER_MASTER_EXPIRED = "masterExpired"  # the master's live entry expired in this scan
TRIGGER_MASTER_INACTIVE = "masterInactive"  # the intended needs-re-election rule
TRIGGER_RETRY = "retry"  # a retry left over from an earlier failed attempt
TRIGGER_CHANNEL_CLOSED = "channelClosed"  # the master's connection closed (1014)


class BrokerHeartbeatManager:
    def __init__(self, manager: ReplicasInfoManager) -> None:
        self.manager = manager
        self.live: BrokerLiveTable = manager.live

    # --- 1015 ---------------------------------------------------------------------------------------

    def check_not_active_broker(self, t: int) -> Result:
        m, live = self.manager, self.live
        expired = live.expire(t)
        triggers: dict[str, str] = {}
        for _, name, broker_id in expired:
            state = m.sync.sets.get(name)
            if state is not None and state.master_broker_id == broker_id and m.contains(name):
                triggers.setdefault(name, TRIGGER_MASTER_EXPIRED)
        for name in self._needing_reelection():  # at t: after expire(t)
            triggers.setdefault(name, TRIGGER_MASTER_INACTIVE)
        for name in live.reelect:
            triggers.setdefault(name, TRIGGER_RETRY)
        elections, notes = self._reelect(triggers, t)
        body = {
            "checkTimeMillis": t,
            "inactiveBrokers": [{"clusterName": c, "brokerName": n, "brokerId": b} for c, n, b in expired],
            **elections,
        }
        return Result(C.SUCCESS, None, None, body, notes)

    def _needing_reelection(self) -> list[str]:
        """Sets whose master is set but not alive at the scan's time t while some registered replica is
        (intended rule). Called right after `live.expire(t)`, which leaves only entries alive at t: "alive"
        is "has an entry", one lookup, the same shortcut as `scan_needed`. A scan visits every set, so with thousands of
        sets this loop is the scan's cost (and a replay's, with a scan every few seconds of log)."""
        replicas, table = self.manager.replicas.sets, self.live.table
        out = []
        for name, state in self.manager.sync.sets.items():
            master = state.master_broker_id
            if master is None or name not in replicas:  # no master, or not a set (m.contains)
                continue
            cluster = state.cluster_name
            if (cluster, name, master) not in table and any(
                (cluster, name, b) in table for b in replicas[name].brokers
            ):
                out.append(name)
        out.sort()
        return out

    def _reelect(self, triggers: dict[str, str], t: int) -> tuple[dict[str, Any], tuple[RoleChange, ...]]:
        m, live = self.manager, self.live
        max_retry = m.config.elect_master_max_retry_count
        elections: list[dict[str, Any]] = []
        new_masters: list[dict[str, Any]] = []
        notes: list[RoleChange] = []
        for name in sorted(triggers):
            left = min(live.reelect.pop(name, max_retry), max_retry)
            if left <= 0 or not m.contains(name):  # retries disabled, or the set was cleaned meanwhile
                continue
            r = m.elect_master(name, -1, False, t)
            left -= 1
            if r.code == C.CONTROLLER_MASTER_NOT_AVAILABLE and left > 0:
                live.reelect[name] = left
            else:
                left = 0
            h = r.header or {}
            elections.append(
                {
                    "brokerName": name,
                    "trigger": triggers[name],
                    "code": r.code,
                    "codeName": r.code_name,
                    "remark": r.remark,
                    "masterBrokerId": h.get("masterBrokerId"),
                    "masterAddress": h.get("masterAddress"),
                    "masterEpoch": m.sync.sets[name].master_epoch,
                    "retriesLeft": left,
                }
            )
            if r.ok:
                new_masters.append(
                    {
                        "brokerName": name,
                        "masterBrokerId": h["masterBrokerId"],
                        "masterAddress": h["masterAddress"],
                        "masterEpoch": h["masterEpoch"],
                    }
                )
            notes.extend(r.notifications)
        return {"elections": elections, "newMasters": new_masters}, tuple(notes)

    def scan_needed(self, now: int) -> bool:
        """Whether a scan proposed at `now` would change anything: an entry expired, a master is inactive
        while a replica is alive, or retries are owed. For the leader's timer; call it on the apply thread.
        Cheap: one comparison when nothing expired, else a pass over the table, plus a lookup per set."""
        live, m = self.live, self.manager
        if live.reelect or live.any_expired(now):
            return True
        # Nothing expired, so every entry is alive at `now`: "alive" is just "has an entry".
        table = live.table
        for name, state in m.sync.sets.items():
            master = state.master_broker_id
            if master is None or (state.cluster_name, name, master) in table or name not in m.replicas.sets:
                continue
            if any((state.cluster_name, name, b) in table for b in m.replicas.sets[name].brokers):
                return True
        return False

    # --- 1014 / 1016 --------------------------------------------------------------------------------

    def close_channel(self, cluster: str, name: str, broker_id: int, t: int) -> Result:
        """The leader saw the broker's connection close: forget its liveness; if it was its set's master,
        re-elect (RocketMQ's listener does the same after the entry commits)."""
        m = self.manager
        removed = self.live.table.pop((cluster, name, broker_id), None) is not None
        triggers = {}
        state = m.sync.sets.get(name)
        if state is not None and state.master_broker_id == broker_id and m.contains(name):
            triggers[name] = TRIGGER_CHANNEL_CLOSED
        elections, notes = self._reelect(triggers, t)
        return Result(C.SUCCESS, None, None, {"removed": removed, **elections}, notes)

    def get_broker_live_info(self, identity: list[Any] | None) -> Result:
        table = self.live.table
        if identity is None:
            return Result(C.SUCCESS, body=[row_json(table[k]) for k in sorted(table)])
        row = table.get((identity[0], identity[1], identity[2]))
        if row is None:
            return Result(C.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS, "brokerIdentityInfo not exist", body=[])
        return Result(C.SUCCESS, body=[row_json(row)])
