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
    retries in the replicated state and the next scans spend them, at their own times. The first failed
    attempt clears the master and bumps masterEpoch once, as RocketMQ's does; a retry that finds nobody
    to elect while the master is already cleared changes nothing (RocketMQ bumps the epoch again: see
    manager.elect_master) and is not reported in `elections`, so an abandoned set is reported once.

A scan may carry aliveSinceMillis, its leader's clock when it took leadership (`since` here): every liveness
question of that entry (expiry, the needs-re-election rule, the election and its notification targets)
takes each broker's last heartbeat as no earlier than `since`, so a new leader does not judge a broker on
heartbeats it could not have received (KAFKA-18138's seeding; a DEVIATION, see manager.py). A scan without
it (entries written before the field existed) judges on lastUpdateTimestamp alone, as before.
"""

from __future__ import annotations

from typing import cast

from statemachine import codes as C
from statemachine.commands import WireIdentity
from statemachine.liveness import BrokerLiveTable, Identity, row_json
from statemachine.manager import ReplicasInfoManager
from statemachine.result import Result, RoleChange
from statemachine.values import JSONObject

TRIGGER_MASTER_EXPIRED = "masterExpired"  # the master's live entry expired in this scan
TRIGGER_MASTER_INACTIVE = "masterInactive"  # the intended needs-re-election rule
TRIGGER_RETRY = "retry"  # a retry left over from an earlier failed attempt
TRIGGER_CHANNEL_CLOSED = "channelClosed"  # the master's connection closed (1014)


class BrokerHeartbeatManager:
    def __init__(self, manager: ReplicasInfoManager) -> None:
        self.manager = manager
        self.live: BrokerLiveTable = manager.live

    # --- 1015 ---------------------------------------------------------------------------------------

    def check_not_active_broker(self, t: int, alive_since: int | None = None) -> Result:
        m, live = self.manager, self.live
        since = _floor_at(alive_since, t)
        expired = live.expire(t, since)
        triggers: dict[str, str] = {}
        for _, name, broker_id in expired:
            state = m.sync.sets.get(name)
            if state is not None and state.master_broker_id == broker_id and m.contains(name):
                triggers.setdefault(name, TRIGGER_MASTER_EXPIRED)
        for name in self._needing_reelection():  # at t: after expire(t, since)
            triggers.setdefault(name, TRIGGER_MASTER_INACTIVE)
        for name in live.reelect:
            triggers.setdefault(name, TRIGGER_RETRY)
        elections, notes = self._reelect(triggers, t, since)
        body = {
            "checkTimeMillis": t,
            "aliveSinceMillis": since,
            "inactiveBrokers": [{"clusterName": c, "brokerName": n, "brokerId": b} for c, n, b in expired],
            **elections,
        }
        return Result(C.SUCCESS, None, None, body, notes)

    def _needing_reelection(self) -> list[str]:
        """Sets whose master is set but not alive at the scan's time t while some registered replica is
        (intended rule). Called right after `live.expire(t, since)`, which leaves only entries alive at t
        (with the scan's floor): "alive" is "has an entry", one lookup, the same shortcut as `scan_needed`. A
        scan visits every set, so with thousands of sets this loop is the scan's cost (and a replay's, with a
        scan every few seconds of log)."""
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

    def _reelect(
        self, triggers: dict[str, str], t: int, since: int | None = None
    ) -> tuple[JSONObject, tuple[RoleChange, ...]]:
        m, live = self.manager, self.live
        max_retry = m.config.elect_master_max_retry_count
        elections: list[JSONObject] = []
        new_masters: list[JSONObject] = []
        notes: list[RoleChange] = []
        for name in sorted(triggers):
            left = min(live.reelect.pop(name, max_retry), max_retry)
            if left <= 0 or not m.contains(name):  # retries disabled, or the set was cleaned meanwhile
                continue
            epoch = m.sync.sets[name].master_epoch
            r = m.elect_master(name, -1, False, t, since)
            left -= 1
            if r.code == C.CONTROLLER_MASTER_NOT_AVAILABLE and left > 0:
                live.reelect[name] = left
            else:
                left = 0
            if r.code == C.CONTROLLER_MASTER_NOT_AVAILABLE and m.sync.sets[name].master_epoch == epoch:
                continue  # nobody to elect and no master left to clear: nothing happened, nothing to report
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

    def scan_needed(self, now: int, alive_since: int | None = None) -> bool:
        """Whether a scan proposed at `now` (with aliveSinceMillis `alive_since`) would change anything: an
        entry expired, a master is inactive while a replica is alive, or retries are owed. For the leader's
        timer; call it on the apply thread. Cheap: one comparison when nothing expired, else a pass over the
        table, plus a lookup per set."""
        live, m = self.live, self.manager
        if live.reelect or live.any_expired(now, _floor_at(alive_since, now)):
            return True
        # Nothing expired, so every entry is alive at `now` (with the floor): "alive" is "has an entry".
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

    def get_broker_live_info(self, identity: WireIdentity | None) -> Result:
        table = self.live.table
        if identity is None:
            return Result(C.SUCCESS, body=[row_json(table[k]) for k in sorted(table)])
        row = table.get(cast(Identity, tuple(identity)))  # checked: [str, str, int] (commands.OPT_IDENTITY)
        if row is None:
            return Result(C.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS, "brokerIdentityInfo not exist", body=[])
        return Result(C.SUCCESS, body=[row_json(row)])


def _floor_at(alive_since: int | None, t: int) -> int | None:
    """The floor a scan applied at `t` uses: its aliveSinceMillis, or None (no floor) when that is later
    than t. A leader stamps both from its own clock, the floor first, so a floor after the scan's time is
    no takeover time this scan can stand on (a clock stepped back, or forged bytes); honouring it would
    keep every broker alive for as long as it stays ahead. Without it the scan judges as an entry without
    the field does."""
    if alive_since is not None and alive_since > t:
        return None
    return alive_since
