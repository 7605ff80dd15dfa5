"""Autopilot (Consul's): the leader heals the membership on its own, one change at a time.

Every `period_s` of the node's clock, on the leader only, the first of these that applies is done:

1. **join**: a configured peer (jRaftInitConf) that is no member is added as a learner. A learner never
   counts for a quorum, so adding one that is down costs nothing; a new empty node started with the group's
   settings is thereby taken in without an operator command.
2. **promote**: a learner that has been healthy (it answered within an election timeout and is within
   `catchup_margin` entries of the leader's log) for `stabilization_s` without a break becomes a voter.
3. **remove dead**: a voter that has not answered for `dead_server_s` is removed, but only while the voters
   left would be at least `min_quorum`; below that it stays, however long it is dead.

Every decision is logged (logger `raft.autopilot`), counted and kept in a short event list (`status()`). It
never changes more than one member per period and never while another membership change is in flight (the
core refuses one then; the next period tries again).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from raft.core import Role
from raft.options import AutopilotOptions
from raft.status import RaftBaseError

if TYPE_CHECKING:
    from raft.node.clock import Timer
    from raft.node.node import Node

log = logging.getLogger("raft.autopilot")
EVENTS_KEPT = 20


@dataclass(frozen=True, slots=True)
class AutopilotEvent:
    time: float  # the node's clock
    action: str  # join, promote, remove
    peer: str
    reason: str


class Autopilot:
    def __init__(self, node: Node, options: AutopilotOptions) -> None:
        self.node = node
        self.options = options
        self.healthy_since: dict[str, float] = {}  # learner -> when it last became healthy (node clock)
        self.silent_since: dict[str, float] = {}  # voter -> when it was first seen silent
        self.counts = {"join": 0, "promote": 0, "remove": 0, "failed": 0}
        self.events: deque[AutopilotEvent] = deque(maxlen=EVENTS_KEPT)
        self._timer: Timer | None = None
        self._task: asyncio.Task[str | None] | None = None

    def configure(self, **changes: float | int | bool) -> AutopilotOptions:
        """New settings from now on (ValueError naming the field for a bad one); the settings in force."""
        self.options = replace(self.options, **changes)  # type: ignore[arg-type]
        return self.options

    def start(self) -> None:
        self._arm()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()

    def _arm(self) -> None:
        d = self.node.driver
        if d.clock is None or d.stopped:
            return
        self._timer = d.clock.call_at(d.clock.time() + self.options.period_s, self._fire)

    def _fire(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.step(), name=f"autopilot-{self.node.id}")
        self._arm()

    async def step(self) -> str | None:
        """One period: the change made ("join n4", ...), None when nothing was due."""
        node, o = self.node, self.options
        core = node.driver.core
        if core is None or core.role != Role.LEADER or not o.enabled or node.driver.stopped:
            self.healthy_since.clear()
            self.silent_since.clear()
            return None
        now = node.driver.now()
        tick_s = node.opts.raft.tick() / 1000
        timeout_s = node.opts.raft.election_timeout_ms / 1000
        st = node.status()
        voters, learners, prs = st.voters, st.learners, st.progress

        def recent(peer: str) -> bool:
            pr = prs.get(peer)
            return pr is not None and 0 <= pr.contact_ticks * tick_s <= timeout_s

        for peer in sorted(set(node.opts.peers) - set(voters) - set(learners)):
            return await self._change("join", peer, "configured peer, not a member", node.add_learner(peer))
        for peer in sorted(learners):
            pr = prs.get(peer)
            if not (recent(peer) and pr is not None and pr.match > 0 and pr.lag <= node.opts.raft.catchup_margin):
                self.healthy_since.pop(peer, None)
                continue
            since = self.healthy_since.setdefault(peer, now)
            if now - since >= o.stabilization_s:
                why = f"healthy and caught up for {now - since:.1f}s"
                return await self._change("promote", peer, why, node.promote(peer))
        for peer in sorted(set(voters) - {node.id}):
            if recent(peer):
                self.silent_since.pop(peer, None)
                continue
            since = self.silent_since.setdefault(peer, now)
            if now - since < o.dead_server_s:
                continue
            if len(voters) - 1 < o.min_quorum:
                log.debug("autopilot: %s silent for %.1fs, kept: min quorum %d", peer, now - since, o.min_quorum)
                continue
            return await self._change("remove", peer, f"silent for {now - since:.1f}s", node.remove_peer(peer))
        return None

    async def _change(self, action: str, peer: str, reason: str, change: object) -> str | None:
        assert asyncio.iscoroutine(change)
        try:
            await change
        except (RaftBaseError, TimeoutError) as e:
            self.counts["failed"] += 1
            log.warning("autopilot: %s %s failed: %s", action, peer, e)
            return None
        self.counts[action] += 1
        self.healthy_since.pop(peer, None)
        self.silent_since.pop(peer, None)
        self.events.append(AutopilotEvent(self.node.driver.now(), action, peer, reason))
        log.info("autopilot: %s %s (%s)", action, peer, reason)
        return f"{action} {peer}"
