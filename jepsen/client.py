"""The harness's HTTP client: one Jepsen process talking to the cluster, and how an answer becomes a
completion type (docs/jepsen.md, "Error mapping").

An op that surely did not happen is `fail` - a read that did not answer, a request refused before it was
sent (connection refused, connect timeout, every node answering 2007), a definite rejection code. A write or
cas whose request may have reached a leader (HTTP 503, read timeout, lost connection, an unexpected code) is
`info`. A cas that did not apply is `ok` with the value false and `current`, the value the key held: its
precondition failed when the log applied it, which the checker uses (the workloads build that record).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import httpx

from jepsen.history import FAIL, INFO, OK

NOT_LEADER = 2007
QUERY_NOT_FOUND = 22
# Codes that say "rejected by the state machine, nothing changed" (controller-spec.md §3.2). 2004 is missing on
# purpose: a controller-triggered election that finds nobody still bumps masterEpoch.
DEFINITE_REJECTIONS = frozenset({16, 22, 2000, 2001, 2002, 2003, 2005, 2006, 2008, 2009, 2010, 2012, 2013, 2014, 2016})
MASTER_STILL_EXIST = 2011


@dataclass
class Answer:
    """What one logical request got. `status`: "ok" (an envelope: see `code`), "rejected" (surely not applied:
    never sent, refused before the log, no leader found) or "unknown" (it may have been applied)."""

    status: str
    code: int | None = None
    env: dict[str, Any] | None = None
    node: str | None = None
    error: str | None = None

    @property
    def body(self) -> Any:
        return (self.env or {}).get("body")

    @property
    def header(self) -> Any:
        return (self.env or {}).get("header")


class LeaderHint:
    """The HTTP address of the last known leader, shared by all clients (2007 answers update it)."""

    def __init__(self) -> None:
        self.address: str | None = None


class Client:
    """One process's HTTP client. Follows 2007 redirects and retries on nodes that refuse connections until
    `op_timeout`; gives up at once when a request may have been delivered.

    With `spread_reads` (the negative control, `--read-mode local`) every GET goes to a random node and its
    answer does not move the leader hint, as a client of a follower-read system would do: the replicas that
    a partition cut off are asked too."""

    def __init__(
        self,
        addresses: list[str],
        hint: LeaderHint,
        rng: random.Random,
        *,
        token: str | None = None,
        request_timeout: float = 5.0,
        connect_timeout: float = 1.0,
        op_timeout: float = 6.0,
        transport: httpx.BaseTransport | None = None,
        spread_reads: bool = False,
    ) -> None:
        self.addresses = addresses
        self.spread_reads = spread_reads
        self.hint = hint
        self.rng = rng
        self.op_timeout = op_timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(
            timeout=httpx.Timeout(request_timeout, connect=connect_timeout),
            limits=httpx.Limits(max_keepalive_connections=0),  # a fresh connection each time: no stale sockets
            headers=headers,
            trust_env=False,
            transport=transport,
        )

    def close(self) -> None:
        self.http.close()

    def _forget(self, target: str) -> None:
        """A leader that does not answer may be paused or cut off: let the next op look for the leader anew."""
        if self.hint.address == target:
            self.hint.address = None

    def _next(self, current: str) -> str:
        others = [a for a in self.addresses if a != current] or self.addresses
        return self.rng.choice(others)

    def call(self, method: str, path: str, body: Any = None) -> Answer:
        deadline = time.monotonic() + self.op_timeout
        anywhere = self.spread_reads and method == "GET"
        target = self.rng.choice(self.addresses) if anywhere else self.hint.address or self.rng.choice(self.addresses)
        last = "no attempt"
        while True:
            try:
                r = self.http.request(method, f"http://{target}{path}", json=body)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
                last = f"{target}: {type(e).__name__}: {e}"  # never delivered
                if self.hint.address == target:
                    self.hint.address = None
            except httpx.HTTPError as e:  # read/write timeout, connection lost after sending
                self._forget(target)
                return Answer("unknown", node=target, error=f"{type(e).__name__}: {e}")
            else:
                if r.status_code == 503:
                    self._forget(target)
                    return Answer("unknown", node=target, error=f"HTTP 503: {r.text[:200]}")
                try:
                    env = r.json()
                except ValueError:
                    return Answer("unknown", node=target, error=f"HTTP {r.status_code}: not JSON: {r.text[:200]}")
                if r.status_code != 200 or not isinstance(env, dict) or "code" not in env:
                    # 4xx answers are refused before anything is proposed
                    status = "rejected" if 400 <= r.status_code < 500 else "unknown"
                    return Answer(status, node=target, error=f"HTTP {r.status_code}: {r.text[:200]}")
                if env["code"] != NOT_LEADER:
                    if not anywhere:
                        self.hint.address = target
                    return Answer("ok", code=env["code"], env=env, node=target)
                leader = (env.get("header") or {}).get("controllerLeaderAddress")
                last = f"{target}: 2007, leader {leader or 'unknown'}"
                if leader and leader != target:
                    self.hint.address = leader
                    if time.monotonic() < deadline:
                        target = leader
                        continue
                else:
                    self.hint.address = None
            if time.monotonic() >= deadline:
                return Answer("rejected", node=target, error=last)
            time.sleep(0.05)  # backoff before the next node: no leader yet, or this one is down
            target = self._next(target)


def outcome(answer: Answer, *, read: bool, ok_codes: frozenset[int] = frozenset({0})) -> str:
    """The completion type of an op from its answer (see the module docstring)."""
    if answer.status == "ok" and answer.code in ok_codes:
        return OK
    if read or answer.status == "rejected":
        return FAIL
    if answer.status == "ok" and answer.code in DEFINITE_REJECTIONS:
        return FAIL
    return INFO
