"""The typed admin operations of a controller node: leadership transfer (and the transferee choice the
hand-over on stop shares), membership changes, snapshots. `ControllerService.admin` is one of these.

Front ends validate their input, call these and shape the answer; the refusals are the service's errors
(errors.py): NotLeaderError, RefusedError (409), MemberNotFoundError (404), UnavailableError (503).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from api.service.errors import MemberNotFoundError, RefusedError, UnavailableError
from raft.core import CoreStatus
from raft.status import RaftBaseError
from snapshot.format import SnapshotMeta
from statemachine.values import JSONObject

if TYPE_CHECKING:
    from api.service.controller import ControllerService

log = logging.getLogger("controllerd")


@dataclass(frozen=True)
class Transfer:
    """A leadership transfer that happened."""

    previous_leader_id: str
    leader_id: str
    term: int
    target_lag_entries: int
    duration_ms: float


@dataclass(frozen=True)
class Membership:
    """The configuration after a membership change of `peer`."""

    peer: str
    voters: list[str]
    learners: list[str]


@dataclass(frozen=True)
class SnapshotTaken:
    """An on-demand snapshot: `meta` of the one taken (`created`), or of the newest one on disk when nothing was
    applied since (None when there is none)."""

    created: bool
    meta: SnapshotMeta | None
    duration_ms: float


def most_caught_up(st: CoreStatus, candidates: list[str], silent_after_ticks: float) -> str | None:
    """The candidate with the highest match index (then the most recent contact) among those that answered the
    leader whose status is `st` within `silent_after_ticks`; None when none did."""
    progress = st.progress

    def heard(p: str) -> bool:
        pr = progress.get(p)
        return pr is not None and 0 <= pr.contact_ticks <= silent_after_ticks

    reachable = [p for p in candidates if heard(p)]
    if not reachable:
        return None
    return max(reachable, key=lambda p: (progress[p].match, -progress[p].contact_ticks))


def choose_transferee(st: CoreStatus, to: str | None, max_lag: int, silent_after_ticks: float) -> tuple[str, int]:
    """(target, its lag in entries) for a transfer from the leader whose status is `st`; RefusedError when
    no voter qualifies. The named voter (or, without `to`, the most caught-up one) must be another voter, have
    answered within `silent_after_ticks` (an election timeout) and lag at most `max_lag` entries: a lagging
    target would leave the group unwritable while it catches up."""
    me, last, progress = st.id, st.last_index, st.progress
    if to == me:
        raise RefusedError("REFUSED", f"{me} already leads")
    if to is not None and to not in st.voters:
        raise RefusedError("REFUSED", f"{to} is not a voter of this group (voters: {', '.join(st.voters)})")
    candidates = [to] if to is not None else [p for p in st.voters if p != me]
    if not candidates:
        raise RefusedError("REFUSED", "there is no other voter to hand leadership to")

    target = most_caught_up(st, candidates, silent_after_ticks)
    if target is None:
        who = to if to is not None else "any other voter"
        raise RefusedError("REFUSED", f"{who} has not answered within an election timeout; not transferring")
    lag = last - progress[target].match
    if lag > max_lag:
        raise RefusedError(
            "REFUSED", f"{target} lags by {lag} entries (more than maxLagEntries={max_lag}); not transferring"
        )
    return target, lag


class AdminOperations:
    """The admin operations of `service`'s node. Leader-only ones raise NotLeaderError elsewhere."""

    def __init__(self, service: ControllerService) -> None:
        self._service = service
        self._node = service.node

    def best_transferee(self) -> str | None:
        """The voter a leader hands over to on stop: the most caught-up one heard within an election timeout."""
        st = self._node.status()
        me = self._service.id
        return most_caught_up(st, [p for p in st.voters if p != me], self._service.election_ticks())

    async def transfer_leadership(self, to: str | None, max_lag: int, timeout_s: float | None) -> Transfer:
        """Hand leadership to `to`, or to the most caught-up voter (choose_transferee's rules); waits until it
        moved. UnavailableError when it did not within `timeout_s` (None: two election timeouts)."""
        svc = self._service
        svc.require_leader()
        target, lag = choose_transferee(self._node.status(), to, max_lag, svc.election_ticks())
        t0 = time.perf_counter()
        try:
            await self._node.transfer_leadership(target, timeout_s)
        except TimeoutError:
            raise UnavailableError(f"leadership did not move to {target} in time") from None
        except RaftBaseError as e:
            raise svc.outcome(e, admin=True) from None
        st = self._node.status()
        return Transfer(st.id, st.leader, st.term, lag, _ms_since(t0))

    async def add_peer(
        self,
        peer: str,
        raft_address: tuple[str, int],
        http_address: str | None,
        timeout_s: float,
        remoting_address: str | None = None,
    ) -> Membership:
        """Add a server: a learner until it is within catch-up margin, then a voter. Its addresses go into the
        CONF entry, so every member learns them from the log (docs/raft.md). UnavailableError when it did not
        catch up within `timeout_s` (it stays a learner)."""
        svc = self._service
        svc.require_leader()
        if peer in self._node.status().voters:
            raise RefusedError("PEER_EXISTS", f"{peer} is already a voter")
        try:
            await self._node.add_peer(peer, raft_address, timeout_s, http_address or "", remoting_address or "")
        except TimeoutError:
            raise UnavailableError(f"{peer} did not catch up within {timeout_s:g}s; it stays a learner") from None
        except RaftBaseError as e:
            raise svc.outcome(e, admin=True) from None
        return self.membership(peer)

    async def remove_peer(self, peer: str) -> Membership:
        """Remove a voter or learner; MemberNotFoundError when it is neither."""
        svc = self._service
        svc.require_leader()
        st = self._node.status()
        if peer not in st.voters and peer not in st.learners:
            raise MemberNotFoundError(f"{peer} is not a member (voters: {', '.join(st.voters)})")
        try:
            await self._node.remove_peer(peer)
        except RaftBaseError as e:
            raise svc.outcome(e, admin=True) from None
        return self.membership(peer)

    def membership(self, peer: str) -> Membership:
        st = self._node.status()
        return Membership(peer, list(st.voters), list(st.learners))

    async def take_snapshot(self) -> SnapshotTaken:
        """Take a snapshot now (any node). When nothing was applied since the newest one, answers that one
        with created=False. A failed save (disk full, I/O error) is an UnavailableError, logged."""
        t0 = time.perf_counter()
        try:
            meta = await self._node.snapshot()
        except RaftBaseError as e:
            raise self._service.outcome(e, admin=True) from None
        except Exception as e:  # noqa: BLE001 - a failed save (disk full, I/O error) is reported, not a bug
            log.exception("on-demand snapshot failed")
            raise UnavailableError(f"the snapshot failed: {type(e).__name__}: {e}") from None
        duration_ms = _ms_since(t0)
        if meta is not None:
            return SnapshotTaken(True, meta, duration_ms)
        newest = self._node.snapshots()
        return SnapshotTaken(False, newest[0] if newest else None, duration_ms)

    def snapshots(self) -> list[SnapshotMeta]:
        """The committed snapshots on this node's disk, newest first."""
        return self._node.snapshots()

    def autopilot(self) -> JSONObject:
        """This node's autopilot: settings, what it counted, its recent decisions (only a leader's act), and the
        learners it watches and the voters it finds silent, with how long (raft/node/autopilot.py)."""
        ap = self._node.autopilot
        o, now = ap.options, self._node.driver.now() if self._node.driver.clock is not None else 0.0
        return {
            "nodeId": self._service.id,
            "leading": self._service.is_leader(),
            "enabled": o.enabled,
            "stabilizationSecs": o.stabilization_s,
            "deadServerSecs": o.dead_server_s,
            "minQuorum": o.min_quorum,
            "counts": dict(ap.counts),
            "healthyForSecs": {p: round(now - t, 3) for p, t in sorted(ap.healthy_since.items())},
            "silentForSecs": {p: round(now - t, 3) for p, t in sorted(ap.silent_since.items())},
            "events": [
                {"secsAgo": round(now - e.time, 3), "action": e.action, "peer": e.peer, "reason": e.reason}
                for e in ap.events
            ],
        }

    def configure_autopilot(
        self,
        enabled: bool | None = None,
        stabilization_s: float | None = None,
        dead_server_s: float | None = None,
        min_quorum: int | None = None,
    ) -> JSONObject:
        """Change this node's autopilot settings (the ones given); its autopilot document after."""
        given = {"enabled": enabled, "stabilization_s": stabilization_s, "dead_server_s": dead_server_s}
        changes: dict[str, float | int | bool] = {k: v for k, v in given.items() if v is not None}
        if min_quorum is not None:
            changes["min_quorum"] = min_quorum
        if changes:
            self._node.autopilot.configure(**changes)
            log.info("autopilot settings changed: %s", changes)
        return self.autopilot()


def _ms_since(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)
