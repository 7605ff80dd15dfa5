"""`ControllerClient`: rmqctl's HTTP client for the controller API (docs/rmqctl-online.md, http-api.md).

Given one or several controller HTTP addresses (`-a "h1:9770;h2:9770"`, mqadmin style, or RMQCTL_ADDRESS),
a request goes to the leader without the operator having to know which node leads:

* an envelope with code 2007 CONTROLLER_NOT_LEADER names the leader (`header.controllerLeaderAddress`):
  the request is sent there next, at once (nothing was proposed, so resending is safe);
* a verb that must see the leader's own answer to a read any node serves (`raft status`, `raft peers`)
  passes `redirect`: an answer it judges to come from a follower is treated like a 2007 (followed to the
  leader it names, else the next address);
* a connection error, an HTTP 503, or a 2007 that names no leader (an election is running) moves on to the
  next address at once (a refused connection costs nothing; a connection attempt gives up after
  `CONNECT_TIMEOUT_S`, so a silent host costs at most that); once every address failed in a round, the
  client sleeps a short backoff (doubling, capped) and starts a new round, the last leader it heard of first;
* a refused connection is final for that address within one request: it is not asked again, and when every
  address refused, the request fails at once (`Unreachable`, exit 3) instead of waiting for the deadline;
* all within one overall deadline (`--timeout`): then `Unreachable` (exit 3), naming what each node said.

A 503 or a lost answer leaves a write's outcome unknown; it is resent (as RocketMQ clients retry a
timeout) unless the verb passes `resend_unknown=False` (leadership transfer, membership changes).

Other answers end the request: an envelope is returned as a `Reply` whatever its code (the verb decides
what a non-zero code means), 401/403 is a usage error about the token (exit 2), 400/413/422 a usage
error naming the field (exit 2), anything else `Failed` (exit 1).

Tests replace the transport, the clock and the sleep through `HOOKS` (no sockets, no waiting).
"""

from __future__ import annotations

import errno
import os
import re
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

import click
import httpx

from cli.rmqctl import DEFAULT_TIMEOUT_S, BadUsage, Failed, Unreachable
from statemachine.values import JSON, JSONObject

ENV_ADDRESS = "RMQCTL_ADDRESS"
ENV_TOKEN = "RMQCTL_TOKEN"
ENV_TIMEOUT = "RMQCTL_TIMEOUT"
ENV_CACERT, ENV_CERT, ENV_KEY = "RMQCTL_CACERT", "RMQCTL_CERT", "RMQCTL_KEY"  # --cacert, --cert, --key
# A connection attempt to one address gives up after this (a host that drops SYNs must not eat the deadline).
CONNECT_TIMEOUT_S = 2.0
NOT_LEADER = 2007  # CONTROLLER_NOT_LEADER
# Why a node could not serve, when the request may still take effect there: a 503 (not committed in time)
# or no answer after the request was sent. Resent unless the verb says not to (`resend_unknown`).
_UNKNOWN = ("HTTP 503", "no answer")
_ENVELOPE_KEYS = frozenset({"code", "codeName", "remark", "header", "body"})
_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}")


@dataclass
class Hooks:
    """What tests replace: the HTTP transport (an `httpx.MockTransport`), the clock and the sleep (a fake
    clock the sleep advances, so a deadline test takes no time), and the backoff between rounds."""

    transport: httpx.BaseTransport | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    backoff_s: float = 0.1
    max_backoff_s: float = 1.0


HOOKS = Hooks()


def parse_addresses(text: str | None) -> list[str]:
    """`"h1:9770;h2:9770"` or `"h1:9770,h2:9770"` (spaces ignored, an `http://`/`https://` prefix kept) as a
    list without duplicates. BadUsage when empty or when an entry is not host:port."""
    if text is None or not text.strip():
        raise BadUsage(f"no controller address: pass -a host:port[;host:port...] or set {ENV_ADDRESS}")
    out: list[str] = []
    for piece in re.split(r"[;,\s]+", text.strip()):
        if not piece:
            continue
        scheme, _, rest = piece.rpartition("://")
        rest = rest.rstrip("/")
        if scheme not in ("", "http", "https") or not _HOST_PORT.fullmatch(rest) or int(rest.rsplit(":", 1)[1]) > 65535:
            raise BadUsage(f"bad controller address {piece!r}: expected host:port (e.g. 127.0.0.1:9770)")
        entry = f"{scheme}://{rest}" if scheme else rest
        if entry not in out:
            out.append(entry)
    if not out:
        raise BadUsage(f"no controller address: pass -a host:port[;host:port...] or set {ENV_ADDRESS}")
    return out


def tls_verify() -> ssl.SSLContext | bool:
    """How https:// addresses are checked: the system's CAs, or --cacert's (RMQCTL_CACERT), presenting --cert
    and --key (RMQCTL_CERT, RMQCTL_KEY) when a controller requires client certificates. BadUsage naming the
    option and file when one cannot be used."""
    cacert, cert, key = (os.environ.get(v) or None for v in (ENV_CACERT, ENV_CERT, ENV_KEY))
    for option, path in (("--cacert", cacert), ("--cert", cert), ("--key", key)):
        if path is not None and not os.path.isfile(path):
            raise BadUsage(f"{option} {path}: no such file")
    if key is not None and cert is None:
        raise BadUsage("--key needs --cert (the client certificate it belongs to)")
    if cacert is None and cert is None:
        return True
    try:
        ctx = ssl.create_default_context(cafile=cacert)
        if cert is not None:
            ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError, ValueError) as e:
        raise BadUsage(f"--cacert {cacert} / --cert {cert} / --key {key}: cannot load: {e}") from None
    return ctx


def _node(address: str) -> str:
    """host:port, the way nodes are named in messages and in mqadmin's output."""
    return address.rpartition("://")[2]


class RequestOptions(TypedDict, total=False):
    """The keyword options of `ControllerClient.request`, which get/post/put/delete pass on."""

    targets: Sequence[str] | None
    follow: bool
    retry: bool
    resend_unknown: bool
    redirect: Callable[[Reply], str | None] | None


@dataclass(frozen=True)
class Reply:
    """One HTTP 200 answer: `envelope` is {"code","codeName","remark","header","body"} (a JSON answer that is
    not an envelope is wrapped as the body of a SUCCESS envelope); `node` is the host:port that answered."""

    node: str
    envelope: JSONObject

    @property
    def code(self) -> int:
        return int(self.envelope.get("code", 0))

    @property
    def code_name(self) -> str:
        return str(self.envelope.get("codeName") or f"UNKNOWN_{self.code}")

    @property
    def remark(self) -> str | None:
        return self.envelope.get("remark")

    @property
    def header(self) -> JSONObject:
        return self.envelope.get("header") or {}

    @property
    def body(self) -> JSON:
        return self.envelope.get("body")

    @property
    def ok(self) -> bool:
        return self.code == 0

    @classmethod
    def of(cls, node: str, data: JSON) -> Reply:
        """The answer of an HTTP 200 whose JSON is `data`: an envelope as it is, anything else as the body of a
        SUCCESS envelope."""
        if isinstance(data, dict) and _ENVELOPE_KEYS <= data.keys():
            return cls(node, data)
        return cls(node, {"code": 0, "codeName": "SUCCESS", "remark": None, "header": None, "body": data})

    def failure(self, what: str | None = None) -> Failed:
        """The exit-1 error for a non-zero code: code, codeName and remark (and what was asked)."""
        prefix = f"{what}: " if what else ""
        return Failed(
            f"{prefix}{self.node} answered {self.code} {self.code_name}: {self.remark or '(no remark)'}",
            code=self.code,
            code_name=self.code_name,
        )


class _Refused(str):
    """Why a node could not serve, when it refused the connection: nothing listens there (the node is down or
    the address is wrong). Final for that address within one request: it is not asked again."""


def _is_refused(error: httpx.TransportError) -> bool:
    """A connection the peer refused (ECONNREFUSED, anywhere in the exception's chain), not one that timed out
    or was reset after it was sent."""
    if not isinstance(error, httpx.ConnectError):
        return False
    e: BaseException | None = error
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return "connection refused" in str(error).lower()


def _describe(response: httpx.Response) -> str:
    """The JSON error body of a non-200 answer (api ErrorBody: error, message, errors[field]) in one line."""
    try:
        data = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:200] or response.reason_phrase
    if not isinstance(data, dict):
        return str(data)[:200]
    message = str(data.get("message") or data.get("detail") or data.get("error") or data)
    fields = [f"{e.get('field')}: {e.get('message')}" for e in data.get("errors") or [] if isinstance(e, dict)]
    fields = [f for f in fields if f not in message]  # the server's message may already name them
    return message + (f" ({'; '.join(fields)})" if fields else "")


@dataclass
class ControllerClient:
    """A session against one controller group. Use as a context manager (it owns an httpx.Client)."""

    addresses: Sequence[str]
    token: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    verbose: bool = False
    hooks: Hooks = field(default_factory=lambda: HOOKS)
    leader_hint: str | None = None  # the last node that answered a routed request, asked first next time

    def __post_init__(self) -> None:
        if not self.addresses:
            raise BadUsage(f"no controller address: pass -a host:port or set {ENV_ADDRESS}")
        if self.timeout_s <= 0:
            raise BadUsage(f"--timeout must be positive, got {self.timeout_s:g}")
        # Addresses learnt from 2007 answers are bare host:port; they get the scheme of the first given one.
        self.scheme = self.addresses[0].rpartition("://")[0] or "http"
        headers = {"Accept": "application/json", "User-Agent": "rmqctl"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        self._http = httpx.Client(
            transport=self.hooks.transport, headers=headers, timeout=self.timeout_s, verify=tls_verify()
        )

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def say(self, message: str) -> None:
        if self.verbose:
            click.echo(f"rmqctl: {message}", err=True)

    def _url(self, address: str, path: str) -> str:
        return f"{address}{path}" if "://" in address else f"{self.scheme}://{address}{path}"

    # ------------------------------------------------------------------ requests

    def get(self, path: str, **kw: Unpack[RequestOptions]) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: JSON = None, **kw: Unpack[RequestOptions]) -> Reply:
        return self.request("POST", path, body, **kw)

    def put(self, path: str, body: JSON = None, **kw: Unpack[RequestOptions]) -> Reply:
        return self.request("PUT", path, body, **kw)

    def delete(self, path: str, **kw: Unpack[RequestOptions]) -> Reply:
        return self.request("DELETE", path, **kw)

    def request(
        self,
        method: str,
        path: str,
        body: JSON = None,
        *,
        targets: Sequence[str] | None = None,
        follow: bool = True,
        retry: bool = True,
        resend_unknown: bool = True,
        redirect: Callable[[Reply], str | None] | None = None,
    ) -> Reply:
        """Send until a node answers, following the leader (see the module doc). `targets` replaces the
        configured addresses for this request; `follow=False` returns a 2007 answer instead of following it;
        `retry=False` makes one round with no backoff; `resend_unknown=False` ends with `Unreachable` at the
        first 503 instead of sending again (for operations that must not run twice: the outcome is unknown).
        `redirect(reply)` is None to accept a SUCCESS answer, or says it came from a node that is not the
        leader: the leader's address to ask next ("" when it knows none), as a 2007 would."""
        clock = self.hooks.clock
        deadline = clock() + self.timeout_s
        pool = [_node(a) if "://" not in a else a for a in (targets or self.addresses)]
        delay = self.hooks.backoff_s
        problems: dict[str, str] = {}
        refused: set[str] = set()  # nodes that refused the connection: not asked again within this request
        while True:
            first = [self.leader_hint] if follow and targets is None and self.leader_hint else []
            queue = [a for a in first + [a for a in pool if a not in first] if _node(a) not in refused]
            tried: set[str] = set()
            while queue:
                address = queue.pop(0)
                if _node(address) in tried or _node(address) in refused:
                    continue
                tried.add(_node(address))
                remaining = deadline - clock()
                if remaining <= 0:
                    raise self._unreachable(problems)
                outcome = self._attempt(method, address, path, body, remaining)
                if isinstance(outcome, str):
                    problems[_node(address)] = outcome
                    self.say(f"{_node(address)}: {outcome}")
                    if isinstance(outcome, _Refused):
                        refused.add(_node(address))
                    if outcome.startswith(_UNKNOWN) and not resend_unknown:
                        raise Unreachable(f"{_node(address)} answered {outcome}; the outcome is unknown, not resending")
                    continue
                elsewhere = redirect(outcome) if redirect is not None and outcome.ok else None
                if (outcome.code == NOT_LEADER or elsewhere is not None) and follow:
                    leader = elsewhere if elsewhere is not None else outcome.header.get("controllerLeaderAddress")
                    problems[outcome.node] = f"not leader (leader: {leader or 'unknown'})"
                    self.say(
                        f"{outcome.node}: not the leader; "
                        + (f"following to {leader}" if leader else "no leader known")
                    )
                    if leader and _node(leader) not in tried:
                        queue.insert(0, leader)
                        self.leader_hint = _node(leader)
                    continue
                if follow and targets is None:
                    self.leader_hint = outcome.node
                self.say(f"answered by {outcome.node}: {outcome.code} {outcome.code_name}")
                return outcome
            hint = [self.leader_hint] if follow and targets is None and self.leader_hint else []
            if all(_node(a) in refused for a in pool + hint):
                # Nothing left to ask: every address refused the connection (a node that is down; its
                # followers, which might name another leader, are among them). Waiting cannot change that
                # within one invocation, so fail now rather than at the deadline.
                raise self._unreachable(problems, all_refused=True)
            remaining = deadline - clock()
            if not retry or remaining <= 0:
                raise self._unreachable(problems)
            pause = min(delay, remaining)
            self.say(f"no node could serve {method} {path}; retrying in {pause:.2f}s")
            self.hooks.sleep(pause)
            delay = min(delay * 2, self.hooks.max_backoff_s)

    def _attempt(
        self, method: str, address: str, path: str, body: JSON, remaining: float, redirected: bool = False
    ) -> Reply | str:
        """One HTTP exchange: a Reply, or a string saying why this node could not serve (try another). A
        node's RocketMQ remoting address (jRaftControllerRPCAddr) answers 307 to its HTTP address: followed
        once, with a note on stderr."""
        node = _node(address)
        self.say(f"{method} {self._url(address, path)}")
        try:
            timeout = httpx.Timeout(remaining, connect=min(remaining, CONNECT_TIMEOUT_S))
            response = self._http.request(method, self._url(address, path), json=body, timeout=timeout)
        except httpx.TransportError as e:
            what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            if _is_refused(e):
                return _Refused(what)
            sent = not isinstance(e, httpx.ConnectError | httpx.ConnectTimeout | httpx.UnsupportedProtocol)
            return f"{_UNKNOWN[1]} ({what})" if sent else what
        status = response.status_code
        if status in (307, 308) and not redirected and response.headers.get("location", "").startswith("http"):
            target = httpx.URL(response.headers["location"])
            http = f"{target.host}:{target.port}" if ":" not in target.host else f"[{target.host}]:{target.port}"
            click.echo(
                f"rmqctl: note: {node} is a RocketMQ remoting address (jRaftControllerRPCAddr); asking its "
                f"HTTP address {http} (controllerHttpAddr) instead",
                err=True,
            )
            return self._attempt(method, http, path, body, remaining, redirected=True)
        if status == 200:
            try:
                data = response.json()
            except ValueError:
                raise Failed(
                    f"{node} answered HTTP 200 with a body that is not JSON: {response.text[:200]!r}"
                ) from None
            return Reply.of(node, data)
        if status == 503:
            return f"{_UNKNOWN[0]}: {_describe(response)}"
        if status in (401, 403):
            hint = (
                "the token was refused: check --token / " + ENV_TOKEN
                if self.token
                else f"this controller requires an admin token: pass --token or set {ENV_TOKEN}"
            )
            raise BadUsage(f"{node} answered HTTP {status} ({_describe(response)}); {hint}")
        if status in (400, 413, 422):
            raise BadUsage(f"{node} rejected the request (HTTP {status}): {_describe(response)}")
        raise Failed(f"{node} answered HTTP {status} to {method} {path}: {_describe(response)}")

    def _unreachable(self, problems: dict[str, str], all_refused: bool = False) -> Unreachable:
        said = "; ".join(f"{node}: {why}" for node, why in problems.items()) or "no attempt was made"
        if all_refused:
            return Unreachable(f"no controller could serve the request: every address refused the connection ({said})")
        # "no leader" when a node answered that it knows none and the others could not be reached (a lost
        # majority, an election); a 503 or a lost answer is something else.
        no_leader = any(why.startswith("not leader") for why in problems.values()) and not any(
            why.startswith(_UNKNOWN) for why in problems.values()
        )
        what = "no leader" if no_leader else "no controller could serve the request"
        return Unreachable(f"{what} within {self.timeout_s:g}s ({said})")
