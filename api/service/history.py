"""A node's event history: broker master elections and controller leader and membership changes, recorded by
every node whether or not anyone watches, kept across the node's restarts (the status page's "Recent
elections and membership changes"; docs/ui.md).

Where the events come from:

* **Elections** are derived from what the node applied: every node applies every committed entry, so every
  node records the same elections with the same time (the leader's clock stamped into the command) and the
  same key (the entry's log index, and the broker set). Recorded: a master elected by an `elect-master`
  request or by the inactive-broker scan / a closed channel (with its trigger), a set left without a master
  (2004, once: a retry that changes nothing is not reported by the state machine), and a harmless request
  that found the master still alive (2011, an `info` line).
* **Controller leader and membership changes** are what this node's raft node saw (`Node.change_listeners`:
  the known leader changed, or a membership entry was applied). A leader change is keyed by its term: there
  is one leader per term, so every node that saw it recorded the same change.

Kept across restarts: the newest HISTORY_SIZE events, with the last log index this node applied (entries up
to it are already recorded: the log replayed at start is not recorded twice) and the last leader, term and
membership it saw (a change made while it was down is recorded when it sees the new state), in
`<controllerStorePath>/events.json`. The file is rewritten atomically (temp file, fsync, rename, fsync of the
directory) off the event loop, at most every FLUSH_DELAY_S while events come in, and at stop. It is a
convenience: a missing or unreadable file starts an empty history (said in the log), and losing the last
FLUSH_DELAY_S of events in a crash loses only what the replayed log does not bring back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable

import msgpack

from raft.leaf.durable import atomic_write
from statemachine import codes as C
from statemachine.result import Result
from statemachine.values import JSON, JSONObject, Unpacked

log = logging.getLogger("controllerd")

HISTORY_FILE = "events.json"
HISTORY_VERSION = 1
HISTORY_SIZE = 200
FLUSH_DELAY_S = 0.5
TRIGGERS = {
    "masterExpired": "the master's heartbeats expired",
    "masterInactive": "the master is not alive while a replica is",
    "retry": "retry of a failed re-election",
    "channelClosed": "the master's connection closed",
}
# Event levels: how the page shows them.
CHANGE, INFO, FAILURE = "change", "info", "failure"


class History:
    """The bounded event history of one node. Call everything on the node's event loop."""

    def __init__(
        self,
        node_id: str,
        directory: str | None,
        name: Callable[[str], str],
        size: int = HISTORY_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.node_id = node_id
        self.directory = directory  # None: in memory only
        self.name = name  # raft id -> how events name the node (n1, ...)
        self.clock = clock
        self.events: deque[JSONObject] = deque(maxlen=size)
        self.applied_through = 0  # the last log index whose events are recorded
        self.leader: tuple[str, int] | None = None  # (leader, term) last seen
        self.members: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (voters, learners) last seen
        self.writes = 0  # files written (tests, metrics)
        self._dirty = False
        self._flush: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # flush(): write now

    # ------------------------------------------------------------------ recording

    def add(self, kind: str, text: str, reason: str, level: str, t: float | None = None, **extra: JSON) -> None:
        event = {"t": self.clock() if t is None else t, "kind": kind, "node": self.node_id, "text": text}
        self.events.append({**event, "reason": reason, "level": level, **extra})
        self._changed()

    def on_applied(self, index: int, data: bytes, result: Result, t_ms: int) -> None:
        """An entry this node applied (every node, every entry but heartbeats), at the command's time `t_ms`."""
        if index <= self.applied_through:
            return  # replayed at start: recorded before the restart
        self.applied_through = index
        if result.code not in _INTERESTING:
            return
        try:  # on the apply path: whatever goes wrong here must not stop the node
            c = msgpack.unpackb(data)
            code = c[1]
            if code == C.ELECT_MASTER:
                self._elect_request(index, c, result, t_ms)
            elif code in (C.CHECK_NOT_ACTIVE_BROKER, C.BROKER_CLOSE_CHANNEL) and result.ok:
                self._reelections(index, result, t_ms)
        except Exception:  # noqa: BLE001
            log.exception("event history: entry %d not recorded", index)

    def _elect_request(self, index: int, c: list[Unpacked], result: Result, t_ms: int) -> None:
        name, asker, designate = c[4], c[5], c[6]  # [v, code, t, clusterName, brokerName, brokerId, designate]
        h = result.header or {}
        if designate:
            who = f"an admin designated broker {asker}"
        elif asker == -1:
            who = "controller-triggered"
        else:
            who = f"broker {asker} asked to be master"
        key = f"log:{index}"
        if result.ok:
            text = f"{name}: broker {h.get('masterBrokerId')} elected master at epoch {h.get('masterEpoch')}"
            self.add("broker-election", text, f"elect-master request ({who})", CHANGE, t_ms / 1000, key=key)
        elif result.code == C.CONTROLLER_MASTER_STILL_EXIST:
            text = f"{name}: broker {h.get('masterBrokerId')} is still master at epoch {h.get('masterEpoch')}"
            reason = f"elect-master request ({who}): {result.code} {result.code_name}, nothing changed"
            self.add("broker-election", text, reason, INFO, t_ms / 1000, key=key)
        elif result.code == C.CONTROLLER_MASTER_NOT_AVAILABLE:
            text = f"{name}: no master elected ({result.code} {result.code_name})"
            self.add("broker-election", text, f"elect-master request ({who})", FAILURE, t_ms / 1000, key=key)

    def _reelections(self, index: int, result: Result, t_ms: int) -> None:
        body = result.body or {}
        expired = body.get("inactiveBrokers") or []
        source = "inactive-broker scan" if "checkTimeMillis" in body else "closed channel"
        for e in body.get("elections") or []:
            name = e.get("brokerName")
            gone = [str(b["brokerId"]) for b in expired if b.get("brokerName") == name]
            why = TRIGGERS.get(e.get("trigger"), str(e.get("trigger")))
            if gone:
                why += f" (expired: broker {', '.join(gone)})"
            if e.get("code") == C.SUCCESS:
                text = f"{name}: broker {e.get('masterBrokerId')} elected master at epoch {e.get('masterEpoch')}"
                level = CHANGE
            else:
                text = f"{name}: no master elected ({e.get('code')} {e.get('codeName')}), epoch {e.get('masterEpoch')}"
                level = FAILURE
            self.add("broker-election", text, f"{source}: {why}", level, t_ms / 1000, key=f"log:{index}:{name}")

    def on_raft(self, leader: str, term: int, voters: tuple[str, ...], learners: tuple[str, ...]) -> None:
        """What this node's raft node says now, after a change of known leader or an applied membership entry."""
        if leader and (self.leader is None or (leader, term) != self.leader):
            if self.leader is None:
                reason = "the first leader this node saw"
            else:
                reason = f"leader was {self.name(self.leader[0])} (term {self.leader[1]})"
            text = f"{self.name(leader)} leads term {term}"
            self.add("raft-leader", text, reason, CHANGE, key=f"term:{term}", term=term, leader=leader)
            self.leader = (leader, term)
        members = (tuple(sorted(voters)), tuple(sorted(learners)))
        if self.members is not None and members != self.members:
            old_v, old_l = self.members
            now_v, now_l = members
            for p in sorted(set(now_v) - set(old_v)):
                self.add(
                    "membership",
                    f"{self.name(p)} is a voter",
                    "promoted from learner" if p in old_l else "added",
                    CHANGE,
                )
            for p in sorted(set(now_l) - set(old_l) - set(old_v)):
                self.add("membership", f"{self.name(p)} joined as a learner", "added; catching up", CHANGE)
            for p in sorted((set(old_v) | set(old_l)) - set(now_v) - set(now_l)):
                self.add("membership", f"{self.name(p)} left the group", "removed", CHANGE)
        if members != self.members:
            self.members = members
            self._changed()

    # ------------------------------------------------------------------ persistence

    @property
    def path(self) -> str | None:
        return os.path.join(self.directory, HISTORY_FILE) if self.directory else None

    def load(self) -> None:
        """Read the file the node wrote before it stopped, if any (before the log is replayed)."""
        path = self.path
        if path is None or not os.path.exists(path):
            return
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            if doc.get("version") != HISTORY_VERSION:
                raise ValueError(f"version {doc.get('version')!r}, this node writes {HISTORY_VERSION}")
            events = [e for e in doc["events"] if isinstance(e, dict) and {"t", "kind", "text"} <= set(e)]
            leader, members = doc.get("leader"), doc.get("members")
            applied = int(doc["appliedThrough"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("event history %s not read (%s): starting an empty one", path, e)
            return
        self.events.extend(events)
        self.applied_through = applied
        self.leader = (str(leader[0]), int(leader[1])) if leader else None
        self.members = (tuple(members[0]), tuple(members[1])) if members else None

    def document(self) -> bytes:
        doc = {
            "version": HISTORY_VERSION,
            "appliedThrough": self.applied_through,
            "leader": list(self.leader) if self.leader else None,
            "members": [list(self.members[0]), list(self.members[1])] if self.members else None,
            "events": list(self.events),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    def _changed(self) -> None:
        if self.directory is None:
            return
        self._dirty = True
        if self._flush is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop (a test driving it directly): written by flush()
            self._flush = loop.create_task(self._flush_later(), name=f"history-{self.node_id}")

    async def _flush_later(self) -> None:
        """One writer at a time: waits FLUSH_DELAY_S (or for flush()), writes, again while events came in."""
        try:
            while self._dirty:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), FLUSH_DELAY_S)
                await self._write()
        finally:
            self._flush = None

    async def _write(self) -> None:
        self._dirty = False
        data, directory = self.document(), self.directory
        assert directory is not None
        try:
            await asyncio.to_thread(atomic_write, directory, HISTORY_FILE, data)
            self.writes += 1
        except OSError as e:
            log.warning("event history not written to %s: %s", self.path, e)

    async def flush(self) -> None:
        """Write what is not written yet, now (the node is stopping)."""
        task = self._flush
        if task is not None:
            self._wake.set()
            await task
            self._wake.clear()
        if self._dirty and self.directory is not None and os.path.isdir(self.directory):
            await self._write()


_INTERESTING = frozenset({C.SUCCESS, C.CONTROLLER_MASTER_STILL_EXIST, C.CONTROLLER_MASTER_NOT_AVAILABLE})
