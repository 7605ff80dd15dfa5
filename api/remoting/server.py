"""The remoting listener: RocketMQ's RemotingCommand protocol over TCP, beside the HTTP API in the same loop.

Brokers and mqadmin connect to a node's jRaftControllerRPCAddr entry (docs/remoting.md). Every request goes
through the same ControllerService calls and the same command builders (api.service.config_requests) as the HTTP routes;
only the framing differs. A connection may carry many requests at once: each is answered (same opaque, the
response flag set, the request's header serialization) as soon as its result is ready, in any order;
oneway requests are served and not answered.

Errors never close a healthy stream: an unknown code is answered 3 REQUEST_CODE_NOT_SUPPORTED with
RocketMQ's remark, a malformed header or field 1 SYSTEM_ERROR with a remark naming the field. Only a broken
stream (a length below 4, a header length past its frame, a frame above the maximum) closes the connection,
as NettyDecoder does, and so does 120 s of silence (Netty's serverChannelMaxIdleTimeSeconds). When a
connection closes, every broker whose heartbeats arrived on it (and no newer connection) goes through
CLOSE_CHANNEL (1014) when this node leads, as RocketMQ's BrokerHousekeepingService.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.client import RemotingClient
from api.remoting.codec import FrameDecoder, FrameError, HeaderError, RemotingCommand
from api.service import (
    ApiError,
    CommandArgumentError,
    ControllerService,
    NotLeaderError,
    UnavailableError,
    not_leader_result,
    observe,
)
from api.service import config_requests as R
from api.service import requests as Q
from api.service.acl import GUARDED, Acl, Denied, admin_request
from api.service.audit import AuditLog
from api.service.metrics import ControllerMetrics
from api.service.outcome import SUCCESS
from api.service.properties import PropertiesError, parse_properties
from api.service.settings import ApiSettings
from api.service.tls import HANDSHAKE_RECORD, HANDSHAKE_TIMEOUT_S, MAX_HANDSHAKES, ServerTls, forward_context
from raft.leaf.admission import ACCEPT_RETRY_S, TlsAdmission
from raft.leaf.peercert import common_name
from statemachine import codes as C
from statemachine import commands
from statemachine.result import Result
from statemachine.values import JSON

log = logging.getLogger("controllerd.remoting")

MAX_IN_FLIGHT = 4096  # per connection: reading pauses above this many unanswered requests
NOTIFY_BROKER_ROLE_CHANGED = 1008  # controller -> broker, oneway
NOTIFY_TIMEOUT_S = 3.0  # RocketMQ's invokeOneway timeout for 1008
FORWARDED_BY = "controllerForwardedBy"  # ours, in a 1009 a follower passes to the leader: never passed on again
IDLE_TIMEOUT_S = 120.0  # NettyServerConfig.serverChannelMaxIdleTimeSeconds: a connection silent this long closes

# The request type of each code in the metrics (the same names the HTTP routes count under).
REQUEST_TYPES = {
    H.BROKER_HEARTBEAT: "CONTROLLER_BROKER_HEARTBEAT",
    C.ALTER_SYNC_STATE_SET: "CONTROLLER_ALTER_SYNC_STATE_SET",
    C.ELECT_MASTER: "CONTROLLER_ELECT_MASTER",
    C.REGISTER_BROKER: "CONTROLLER_REGISTER_BROKER",
    C.GET_REPLICA_INFO: "CONTROLLER_GET_REPLICA_INFO",
    H.GET_METADATA_INFO: "CONTROLLER_GET_METADATA_INFO",
    C.GET_SYNC_STATE_DATA: "CONTROLLER_GET_SYNC_STATE_DATA",
    C.UPDATE_CONTROLLER_CONFIG: "CONTROLLER_UPDATE_CONTROLLER_CONFIG",
    H.GET_CONTROLLER_CONFIG: "CONTROLLER_GET_CONTROLLER_CONFIG",
    C.CLEAN_BROKER_DATA: "CONTROLLER_CLEAN_BROKER_DATA",
    C.GET_NEXT_BROKER_ID: "CONTROLLER_GET_NEXT_BROKER_ID",
    C.APPLY_BROKER_ID: "CONTROLLER_APPLY_BROKER_ID",
}
HEARTBEAT_TYPE = REQUEST_TYPES[H.BROKER_HEARTBEAT]
_HEARTBEAT_PROBE = RemotingCommand(H.BROKER_HEARTBEAT)  # a JSON heartbeat: what `AnswerTemplate` renders from


class RequestError(Exception):
    """A request the controller refuses before any consensus: answered SYSTEM_ERROR with this remark."""


def not_supported(code: int) -> str:
    return f" request type {code} not supported"  # NettyRemotingAbstract's remark, leading space included


def _json_body(cmd: RemotingCommand, what: str) -> JSON:
    if not cmd.body:
        raise RequestError(f"the body ({what}) is empty")
    try:
        return json.loads(cmd.body)
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestError(f"the body is not JSON ({what}): {e}") from None
    except RecursionError:
        raise RequestError(f"the body is not JSON ({what}): nested too deeply") from None


def _body_bytes(body: JSON) -> bytes | None:
    return None if body is None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def properties_text(values: dict[str, str]) -> bytes:
    """MixAll.properties2String: one `key=value` line per entry."""
    return "".join(f"{k}={v}\n" for k, v in values.items()).encode()


def frame_of(response: RemotingCommand) -> bytes:
    """`response` encoded. One whose header does not encode (past 24 bits) is answered all the same, never left
    waiting: SYSTEM_ERROR saying so."""
    try:
        return codec.encode(response)
    except ValueError as e:
        log.error("remoting answer %d (opaque %d) not encodable: %s", response.code, response.opaque, e)
        return codec.encode(response.failed(f"the answer could not be encoded: {e}"))


class _EntryOutcome:
    """A done heartbeat entry's outcome, read once for every heartbeat it carried (`_heartbeat_settled`): the
    service's Result, or the error or cancellation it raised; when, for the heartbeats' latency; and a JSON
    answer's template when the outcome is a Result."""

    __slots__ = ("entry", "outcome", "at", "template")

    def __init__(self, dispatcher: Dispatcher, entry: asyncio.Future[Result]) -> None:
        self.entry = entry
        self.at = time.perf_counter()
        self.template: codec.AnswerTemplate | None = None
        try:
            self.outcome: Result | BaseException = dispatcher.service.settled(entry, HEARTBEAT_TYPE)
        except (Exception, asyncio.CancelledError) as e:
            self.outcome = e
            return
        self.template = codec.AnswerTemplate.of(dispatcher._response(_HEARTBEAT_PROBE, self.outcome))


class Dispatcher:
    """code -> answer: the request's fields decoded by the Java header classes' lists, then the service."""

    def __init__(self, service: ControllerService, settings: ApiSettings, metrics: ControllerMetrics | None) -> None:
        self.service = service
        self.settings = settings
        self.metrics = metrics
        self.acl = Acl(settings.remoting_acl_file) if settings.remoting_acl_file else None
        self.audit = AuditLog.open(settings.audit_log) if settings.audit_log else None
        self.forward_tls: ssl.SSLContext | None = None  # TLS on: how this node reaches a peer's remoting port
        self._entry: _EntryOutcome | None = None  # the last batched heartbeat entry answered
        self.handlers: dict[int, Callable[[RemotingCommand], Awaitable[Result]]] = {
            H.BROKER_HEARTBEAT: self._header(Q.BrokerHeartbeat),
            C.ALTER_SYNC_STATE_SET: self._alter,
            C.ELECT_MASTER: self._elect,
            C.REGISTER_BROKER: self._header(Q.RegisterBroker),
            C.GET_REPLICA_INFO: self._header(Q.GetReplicaInfo),
            H.GET_METADATA_INFO: self._metadata,
            C.GET_SYNC_STATE_DATA: self._sync_state_data,
            C.UPDATE_CONTROLLER_CONFIG: self._update_config,
            H.GET_CONTROLLER_CONFIG: self._get_config,
            C.CLEAN_BROKER_DATA: self._header(Q.CleanBrokerData),
            C.GET_NEXT_BROKER_ID: self._header(Q.GetNextBrokerId),
            C.APPLY_BROKER_ID: self._header(Q.ApplyBrokerId),
        }

    def fields(self, cmd: RemotingCommand) -> dict[str, Q.HeaderValue]:
        return H.parse(H.REQUEST[cmd.code], cmd.ext_fields, H.DEFAULTS.get(cmd.code))

    # --- the service calls (as the HTTP Gateway's submit / local) ---

    def _header(self, request: type[Q.Request]) -> Callable[[RemotingCommand], Awaitable[Result]]:
        """A request carried whole by its header: decoded by its class's schema, then `service.submit`."""
        return lambda cmd: self.service.submit(Q.of(request, self.fields(cmd)))

    async def _alter(self, cmd: RemotingCommand) -> Result:
        h = self.fields(cmd)
        body = _json_body(cmd, "SyncStateSet")
        ids = body.get("syncStateSet") if isinstance(body, dict) else None
        epoch = body.get("syncStateSetEpoch") if isinstance(body, dict) else None
        if not isinstance(ids, list) or type(epoch) is not int:
            raise RequestError('the body must be a SyncStateSet {"syncStateSet":[ids],"syncStateSetEpoch":int}')
        request = Q.of(Q.AlterSyncStateSet, {**h, "syncStateSet": tuple(ids), "syncStateSetEpoch": epoch})
        return await self.service.submit(request)

    async def _elect(self, cmd: RemotingCommand) -> Result:
        request = Q.of(Q.ElectMaster, self.fields(cmd))
        result = await self.service.submit(request)
        if self.metrics is not None:
            name = request.brokerName
            self.metrics.observe_election(self.metrics.cluster_of(name, request.clusterName), name, result.code)
        return result

    async def _metadata(self, cmd: RemotingCommand) -> Result:
        header = self.service.metadata(remoting=True)
        if header["controllerLeaderId"] is None:  # JRaftController: "" while no leader is known (the address null)
            header["controllerLeaderId"] = ""
        return Result(C.SUCCESS, header=header)

    async def _sync_state_data(self, cmd: RemotingCommand) -> Result:
        names = _json_body(cmd, "a JSON array of brokerNames")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise RequestError("the body must be a JSON array of brokerNames")
        return await self.service.submit(Q.GetSyncStateData(brokerNames=tuple(names)))

    async def _get_config(self, cmd: RemotingCommand) -> Result:
        return Result(C.SUCCESS, body=R.config_view(self.service, self.settings))

    async def _update_config(self, cmd: RemotingCommand) -> Result:
        if not cmd.body:
            raise RequestError("the body (properties text key=value) is empty")
        try:
            props = {p.key: p.value for p in parse_properties(cmd.body.decode(), "the body")}
        except (PropertiesError, UnicodeDecodeError) as e:
            raise RequestError(f"the body is not properties text: {e}") from None
        try:
            plan = R.plan_config_update(props, self.settings)
        except ApiError as e:
            raise RequestError(e.remark()) from None
        if isinstance(plan, Result):
            return plan
        try:
            return await self.service.submit(Q.UpdateControllerConfig(changes=plan))
        except NotLeaderError as e:
            return await self._forward_config(cmd, e)

    async def _forward_config(self, cmd: RemotingCommand, not_leader: NotLeaderError) -> Result:
        """A 1009 on a follower is passed to the leader, whose answer is this node's: mqadmin
        updateControllerConfig sends it to every address of its -a list and fails on any answer but SUCCESS,
        while here the keys are replicated (one change through the log, docs/statemachine.md) rather than set
        node by node. Forwarded once (the mark in extFields); unreachable leader: the 2007."""
        address = self.service.remoting_address(not_leader.leader_id) if not_leader.leader_id else None
        if FORWARDED_BY in cmd.ext_fields or not address:
            raise not_leader
        host, _, port = address.rpartition(":")
        try:
            async with asyncio.timeout(NOTIFY_TIMEOUT_S + self.service.opts.request_timeout_s):
                client = await RemotingClient.connect(host.strip("[]"), int(port), cmd.serialize_type, self.forward_tls)
                try:
                    ext = {**cmd.ext_fields, FORWARDED_BY: self.service.id}
                    answer = await client.request(cmd.code, ext, cmd.body, timeout=self.service.opts.request_timeout_s)
                finally:
                    client.close()
        except (OSError, ValueError, TimeoutError) as e:
            log.warning("config update (1009) not forwarded to the leader at %s: %s", address, e)
            raise not_leader from None
        if answer.code == C.CONTROLLER_NOT_LEADER:  # leadership moved meanwhile: the broker asks again
            raise not_leader
        return Result(answer.code, answer.remark)

    # --- answers ---

    async def answer(self, cmd: RemotingCommand, peer: str = "?", cert_name: str | None = None) -> RemotingCommand:
        """The response to a request (never raises: every failure is a RocketMQ response). `peer` and the TLS
        client certificate's `cert_name` say who sent it (the ACL's refusals and the audit log name them)."""
        handler = self.handlers.get(cmd.code)
        if handler is None:
            return cmd.response(C.REQUEST_CODE_NOT_SUPPORTED, not_supported(cmd.code))
        who = f"cn:{cert_name}" if cert_name else "anonymous"
        if self.acl is not None and cmd.code in GUARDED:
            verdict = self.acl.check(cmd.code, cmd.ext_fields, cmd.body)
            if isinstance(verdict, Denied):
                log.warning("remoting request %d from %s refused (NO_PERMISSION): %s", cmd.code, peer, verdict.remark)
                if self.metrics is not None:
                    self.metrics.rejected("no_permission")
                return cmd.response(C.NO_PERMISSION, verdict.remark)
            who = verdict.access_key
        response = await self._answer(cmd, handler)
        if self.audit is not None and admin_request(cmd.code, cmd.ext_fields):
            fields: dict[str, object] = dict(cmd.ext_fields)
            if cmd.body:
                fields["body"] = cmd.body.decode(errors="replace")
            self.audit.record("remoting", who, peer, REQUEST_TYPES[cmd.code], fields, response.code, response.remark)
        return response

    def answer_soon(
        self, cmd: RemotingCommand, reply: Callable[[bytes | None], None], item: list[str | int] | None = None
    ) -> bool:
        """The hot request, a broker's heartbeat (904), answered without a task: proposed at once, and
        `reply(frame)` called with its answer's frame once its entry is done (`reply(None)` when there is none to
        send: a cancelled proposal, as for a cancelled task, or a oneway heartbeat). `item` is the heartbeat's
        1202 item when the caller has read it (`H.heartbeat_item`). A plain header batched into the turn's 1202
        (`propose_heartbeat`) has no future of its own: the entry's done-callback calls it; any other waits on
        its proposal's future. The same answer, metrics and listeners as `answer` gives it; a task and its
        wake-ups per heartbeat were a tenth of a busy leader's CPU (docs/performance.md).
        False, and nothing done, for any other request or with an ACL: `answer` serves those."""
        if cmd.code != H.BROKER_HEARTBEAT or self.acl is not None:  # 904 is GUARDED: the ACL checks it
            return False
        t0 = time.perf_counter()

        def settled(fut: asyncio.Future[Result]) -> None:
            try:
                outcome: Result | Exception = self.service.settled(fut, HEARTBEAT_TYPE)
            except Exception as e:
                outcome = e
            except BaseException as e:
                self._cancelled(cmd, t0, e)
                reply(None)
                return
            reply(self._frame(cmd, self._respond(cmd, t0, outcome)))

        try:
            if item is None:
                item = H.heartbeat_item(cmd.ext_fields)  # a Java broker's header: no typed request in between
            # batched: the entry's done-callback answers it, with no future or closure of its own
            if item is not None and self.service.propose_heartbeat(
                item, functools.partial(self._heartbeat_settled, cmd, t0, reply)
            ):
                return True
            proposed = self.service.propose(Q.of(Q.BrokerHeartbeat, self.fields(cmd)))
        except Exception as e:
            reply(self._frame(cmd, self._respond(cmd, t0, e)))
            return True
        if isinstance(proposed, Result):
            reply(self._frame(cmd, self._respond(cmd, t0, proposed)))
            return True
        proposed.add_done_callback(settled)
        return True

    def _heartbeat_settled(
        self, cmd: RemotingCommand, t0: float, reply: Callable[[bytes | None], None], entry: asyncio.Future[Result]
    ) -> None:
        """A batched heartbeat's entry is done: its answer. The entry's outcome is read once for all the
        heartbeats it carried (the service's listeners hear it once, for the one proposal), and a JSON answer is
        its template's frame with this heartbeat's opaque (`codec.AnswerTemplate`): a 30,000-broker leader
        spent a sixth of its time building the same answer again for every heartbeat (docs/performance.md)."""
        done = self._entry
        if done is None or done.entry is not entry:
            done = self._entry = _EntryOutcome(self, entry)
        outcome = done.outcome
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            self._cancelled(cmd, t0, outcome)
            reply(None)
            return
        if not isinstance(outcome, Result):
            reply(self._frame(cmd, self._respond(cmd, t0, outcome)))
            return
        if self.metrics is not None:
            self.metrics.observe_request(HEARTBEAT_TYPE, SUCCESS, (done.at - t0) * 1e6)
        if cmd.is_oneway:
            reply(None)
        elif done.template is not None and cmd.serialize_type == codec.JSON:
            reply(done.template.frame(cmd.opaque))
        else:
            reply(self._frame(cmd, self._response(cmd, outcome)))

    def _frame(self, cmd: RemotingCommand, response: RemotingCommand) -> bytes | None:
        """`response`'s frame, None for a oneway request (served, not answered)."""
        return None if cmd.is_oneway else frame_of(response)

    async def _answer(
        self, cmd: RemotingCommand, handler: Callable[[RemotingCommand], Awaitable[Result]]
    ) -> RemotingCommand:
        t0 = time.perf_counter()
        try:
            outcome: Result | Exception = await handler(cmd)
        except Exception as e:
            outcome = e
        except BaseException as e:
            self._cancelled(cmd, t0, e)
            raise
        return self._respond(cmd, t0, outcome)

    def _cancelled(self, cmd: RemotingCommand, t0: float, e: BaseException) -> None:
        """`cmd`, begun at `t0`, was cancelled (its connection or the server closing): not answered, counted
        failed."""
        observe(self.metrics, REQUEST_TYPES[cmd.code], t0, self.service.opts.request_timeout_s, e)

    def _respond(self, cmd: RemotingCommand, t0: float, outcome: Result | Exception) -> RemotingCommand:
        """The response to `cmd` begun at `t0` (time.perf_counter): its Result, or what an error means for
        it (never a dropped connection: an unexpected error is a bug, logged and answered); counted."""
        error = None if isinstance(outcome, Result) else outcome
        observe(self.metrics, REQUEST_TYPES[cmd.code], t0, self.service.opts.request_timeout_s, error)
        return self._response(cmd, outcome)

    def _response(self, cmd: RemotingCommand, outcome: Result | Exception) -> RemotingCommand:
        """What `outcome` answers to `cmd` (uncounted: `_respond` counts)."""
        if isinstance(outcome, Result):
            body = properties_text(outcome.body) if cmd.code == H.GET_CONTROLLER_CONFIG else _body_bytes(outcome.body)
            return cmd.response(outcome.code, outcome.remark, H.to_ext(outcome.header, cmd.code), body)
        if isinstance(outcome, NotLeaderError):
            lid = outcome.leader_id or None
            r = not_leader_result(outcome, self.service.remoting_address(lid) if lid else None)
            return cmd.response(r.code, r.remark, H.to_ext(r.header))
        if isinstance(outcome, UnavailableError):
            return cmd.response(C.SYSTEM_ERROR, f"unavailable: {outcome}")
        if isinstance(outcome, (H.HeaderFieldError, RequestError, CommandArgumentError)):
            return cmd.response(C.SYSTEM_ERROR, str(outcome))
        log.error("remoting request %d failed", cmd.code, exc_info=outcome)
        return cmd.response(C.SYSTEM_ERROR, f"{type(outcome).__name__}: {outcome}")


class _Connection(asyncio.Protocol):
    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.max_frame)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.in_flight = 0
        self.paused = False  # reading paused (throttle)
        self.write_blocked = False  # the transport's write buffer is above its high-water mark
        self.brokers: set[tuple[str, str, int]] = set()
        self.framed = False  # a RocketMQ frame arrived: the stream is remoting, never HTTP
        self.active = time.monotonic()  # the last byte read or written (Netty's ALL_IDLE clock)
        self.cert_name: str | None = None  # the TLS client certificate's subject CN, if one was verified
        self.unsent: list[bytes] = []  # this loop turn's answers, written together by flush()

    def redirect_http(self, target: str) -> None:
        """Answer an HTTP request sent to the remoting port with 307 to this node's HTTP address (same path),
        and a JSON body saying so, then close: rmqctl and curl -L follow it, a person reads it."""
        service = self.server.service
        http = service.http_address(service.id)
        message = (
            f"this is the RocketMQ remoting address of controller {service.id} (jRaftControllerRPCAddr); "
            f"its HTTP API is on {http} (controllerHttpAddr)"
        )
        body = json.dumps({"error": "REMOTING_PORT", "message": message, "httpAddress": http}).encode()
        head = "HTTP/1.1 307 Temporary Redirect\r\n" if http else "HTTP/1.1 421 Misdirected Request\r\n"
        if http:
            head += f"Location: http://{http}{target}\r\n"
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        self.server.http_redirected(self.peer, http)
        if self.transport is not None:
            self.transport.write(head.encode() + body)
        self.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are no asyncio.Transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.cert_name = common_name(transport.get_extra_info("peercert"))
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.active = time.monotonic()
        try:
            frames = self.decoder.feed(data)
        except FrameError as e:
            target = codec.http_request_target(self.decoder.head(4096)) if not self.framed else None
            if target is not None:  # an HTTP client (rmqctl, curl, a browser) given the remoting address
                self.redirect_http(target)
                return
            if not self.framed and self.decoder.head(1) == bytes([HANDSHAKE_RECORD]):
                self.server.refused(self.peer, "tls_disabled", "a TLS handshake, but tls.server.mode=disabled")
            else:
                log.warning("remoting connection from %s closed: %s", self.peer, e)
            self.close()
            return
        self.framed = self.framed or bool(frames)
        for frame in frames:
            try:
                cmd = codec.decode(frame)
            except HeaderError as e:  # the frame boundary holds: answer it (opaque 0 when unreadable)
                stype = frame[0] if frame[0] in (codec.JSON, codec.ROCKETMQ) else codec.JSON
                bad = RemotingCommand(0, e.opaque or 0, serialize_type=stype)
                self.send(bad.response(C.SYSTEM_ERROR, f"malformed header: {e}"))
                continue
            if cmd.is_response:
                continue  # the controller sends no requests on accepted connections: nothing to match
            self.start(cmd)

    def start(self, cmd: RemotingCommand) -> None:
        item = None
        if cmd.code == H.BROKER_HEARTBEAT:
            item = H.heartbeat_item(cmd.ext_fields)
            if item is None:
                self.server.saw_heartbeat(self, cmd)
            else:
                self.server.saw_broker(self, H.identity(item))
        self.in_flight += 1
        if self.in_flight >= MAX_IN_FLIGHT and not self.paused:
            self.throttle()
        dispatcher = self.server.dispatcher
        if dispatcher.answer_soon(cmd, functools.partial(self.answered, cmd), item):
            return
        task = asyncio.get_running_loop().create_task(dispatcher.answer(cmd, self.peer, self.cert_name))
        task.add_done_callback(lambda t: self.done(cmd, None if t.cancelled() else t.result()))

    def done(self, cmd: RemotingCommand, response: RemotingCommand | None) -> None:
        """`cmd` is served: its `response` sent (None: cancelled, not answered; a oneway request: not sent)."""
        self.answered(cmd, None if response is None else self.server.dispatcher._frame(cmd, response))

    def answered(self, cmd: RemotingCommand, frame: bytes | None) -> None:
        """`cmd` is served: its answer's `frame` sent (None: nothing to send)."""
        self.in_flight -= 1
        if self.paused and self.in_flight < MAX_IN_FLIGHT // 2:
            self.throttle()
        if frame is not None:
            self.write(frame)

    def throttle(self) -> None:
        """Reading pauses while MAX_IN_FLIGHT requests are unanswered (until half of them are) or while the
        answers are not being read (the transport's write buffer above its high-water mark): a client cannot
        make the listener hold more than that for it."""
        pause = self.write_blocked or self.in_flight >= (MAX_IN_FLIGHT // 2 if self.paused else MAX_IN_FLIGHT)
        if pause == self.paused or self.transport is None or self.transport.is_closing():
            return
        self.paused = pause
        if pause:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def pause_writing(self) -> None:
        self.write_blocked = True
        self.throttle()

    def resume_writing(self) -> None:
        self.write_blocked = False
        self.throttle()

    def send(self, response: RemotingCommand) -> None:
        self.write(frame_of(response))

    def write(self, frame: bytes) -> None:
        """Queue `frame` for this loop turn's `flush`."""
        if self.transport is not None and not self.transport.is_closing():
            self.active = time.monotonic()
            self.unsent.append(frame)
            if len(self.unsent) == 1:
                asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write the answers queued since the last flush in one call, at the end of the loop turn that queued
        them (a committed batch answers its requests in one turn). Each write is a system call, and on loopback
        it also runs the reader's side of TCP: one per batch instead of one per answer. Same bytes, same order."""
        unsent, self.unsent = self.unsent, []
        if unsent and self.transport is not None and not self.transport.is_closing():
            self.transport.write(unsent[0] if len(unsent) == 1 else b"".join(unsent))

    def close(self) -> None:
        self.flush()  # answers given before the close still leave, as they did when each was written at once
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection at once, unsent answers included (the listener is stopping)."""
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        self.server.channel_closed(self)
        self.transport = None


class RemotingServer:
    """The listener of one node. `await start()` binds (OSError names the address), `await stop()` closes."""

    def __init__(
        self,
        service: ControllerService,
        settings: ApiSettings,
        address: tuple[str, int],
        metrics: ControllerMetrics | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        self.service = service
        self.address = address
        self.idle_timeout_s = idle_timeout_s
        self.max_frame = settings.remoting_max_frame_bytes
        self.dispatcher = Dispatcher(service, settings, metrics)
        self.connections: set[_Connection] = set()
        self.channels: dict[tuple[str, str, int], _Connection] = {}  # broker identity -> its latest connection
        self.closed_channels = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self.notified = 0  # 1008 frames written to brokers
        self.http_clients_warned: set[str] = set()  # hosts told to use controllerHttpAddr (http_redirected)
        self.metrics = metrics
        self.tls = ServerTls(settings.remoting_tls, "remoting") if settings.remoting_tls.enabled else None
        # TLS on (permissive or enforcing): our own accept loop, so that the first byte can be looked at before
        # the connection is handed to a transport, TLS (0x16, a handshake record) or plain, as RocketMQ's
        # TlsModeHandler does (raft.leaf.admission: the bounds on connections waiting for their first byte or
        # handshake, the deadline)
        self.admission: TlsAdmission | None = None
        if self.tls is not None:
            self.dispatcher.forward_tls = forward_context(self.tls.effective)
            self.admission = TlsAdmission(
                self.tls.context,
                lambda: _Connection(self),
                self.refused,
                self._accept_failed,
                handshakes_max=MAX_HANDSHAKES,
                handshake_timeout_s=HANDSHAKE_TIMEOUT_S,
                mode=self.tls.mode,
                plain_refused="a plain connection, but tls.server.mode=enforcing",
                waiting_for="first byte or handshake",
                peer_name=lambda addr: f"{addr[0]}:{addr[1]}",
            )
        self.refusals: dict[str, int] = {}  # reason -> connections refused (also in /metrics)
        self._sock: socket.socket | None = None
        service.listeners.append(self._on_result)

    async def start(self) -> None:
        host, port = self.address
        loop = asyncio.get_running_loop()
        try:
            if self.tls is None:
                self._server = await loop.create_server(lambda: _Connection(self), host, port, backlog=2048)
            else:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                self._sock = socket.create_server((host, port), family=family, backlog=2048)
                self._sock.setblocking(False)
        except OSError as e:
            raise OSError(e.errno, f"cannot listen for remoting on {host}:{port}: {e.strerror}") from None
        tls = f", TLS {self.tls.mode}" if self.tls is not None else ""
        log.info("serving RocketMQ remoting on %s:%d (raft %s%s)", host, self.port, self.service.id, tls)
        if self._sock is not None and self.admission is not None:
            self._spawn(self.admission.accept(self._sock))
        self._spawn(self._close_idle())

    def _accept_failed(self, e: OSError) -> bool:
        """Out of file descriptors, say: keep the port, try again shortly (Netty also pauses accepting 1 s)."""
        log.error("remoting accept on %s:%d failed: %s; retrying in %.1f s", *self.address, e, ACCEPT_RETRY_S)
        return True

    @property
    def handshaking(self) -> int:
        """Accepted connections whose first byte or TLS handshake is awaited."""
        return len(self.admission.admitting) if self.admission is not None else 0

    @property
    def handshakes_max(self) -> int:
        """At most this many connections wait for their first byte or TLS handshake; one more drops the oldest."""
        return self.admission.handshakes_max if self.admission is not None else MAX_HANDSHAKES

    @handshakes_max.setter
    def handshakes_max(self, n: int) -> None:
        assert self.admission is not None, "no TLS: connections are handed over at accept"
        self.admission.handshakes_max = n

    def refused(self, peer: str, reason: str, text: str) -> None:
        """One log line naming the peer and the reason, one count under `reason` (/metrics:
        controllerd_tls_refused_total{listener="remoting"})."""
        self.refusals[reason] = self.refusals.get(reason, 0) + 1
        if self.metrics is not None:
            self.metrics.tls_refused("remoting", reason)
        log.warning("remoting connection from %s refused: %s", peer, text)

    async def _close_idle(self) -> None:
        """Close connections that neither sent nor received anything for idle_timeout_s and have no request in
        flight (a half-sent frame, a client gone without a FIN), as Netty's IdleStateHandler does on the
        controller's server; their brokers then go through CLOSE_CHANNEL (BrokerHousekeepingService.onChannelIdle)."""
        period = self.idle_timeout_s / 4
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for c in list(self.connections):
                if c.in_flight == 0 and now - c.active >= self.idle_timeout_s:
                    log.warning(
                        "remoting connection from %s closed: idle for %.0f s (%d bytes of a frame pending)",
                        c.peer,
                        now - c.active,
                        c.decoder.pending,
                    )
                    c.close()

    @property
    def port(self) -> int:
        if self._sock is not None:
            return int(self._sock.getsockname()[1])
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            for c in list(self.connections):
                c.abort()
        if self._server is not None:
            self._server.close()
            for c in list(self.connections):
                c.abort()  # not close(): that first flushes the write buffer, forever for a peer that does not read
            await self._server.wait_closed()
            self._server = None
        for t in [*self._tasks, *(self.admission.admitting if self.admission is not None else ())]:
            t.cancel()

    def _on_result(self, request_type: str, result: Result) -> None:
        """The leader's results: push NOTIFY_BROKER_ROLE_CHANGED (1008) to every member alive at the command's
        time, on a connection the controller opens to the broker's address (oneway, as RocketMQ does); close the
        connection of every broker an inactive-broker scan expired."""
        if self._server is None:
            return
        if request_type == "CHECK_NOT_ACTIVE_BROKER" and result.ok and isinstance(result.body, dict):
            for b in result.body.get("inactiveBrokers") or ():
                self.close_expired((b["clusterName"], b["brokerName"], b["brokerId"]))
        for note in result.notifications:
            ext = H.to_ext(note.header())
            body = _body_bytes(note.body())
            for _, address in note.targets:
                self._spawn(self._notify(address, ext, body))

    def _spawn(self, coro: Coroutine[object, object, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self, address: str, ext: dict[str, str], body: bytes | None) -> None:
        host, _, port = address.rpartition(":")
        frame = codec.encode(RemotingCommand(NOTIFY_BROKER_ROLE_CHANGED, 0, codec.ONEWAY_FLAG, None, ext, body))
        try:
            async with asyncio.timeout(NOTIFY_TIMEOUT_S):
                _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
                writer.write(frame)
                await writer.drain()
                writer.close()
                await writer.wait_closed()
            self.notified += 1
        except (OSError, ValueError, TimeoutError) as e:
            log.warning("role-change notification (1008) to broker %s failed: %s", address, e)

    def http_redirected(self, peer: str, http: str | None) -> None:
        """An HTTP client used this node's remoting address, as it could when jRaftControllerRPCAddr meant the
        HTTP address (earlier builds): a warning saying what to change, once per client host; info after."""
        host = peer.rpartition(":")[0] or peer
        if host in self.http_clients_warned:
            log.info("remoting connection from %s sent an HTTP request; redirected to %s", peer, http)
            return
        self.http_clients_warned.add(host)
        log.warning(
            "HTTP request from %s on the RocketMQ remoting address %s:%d (jRaftControllerRPCAddr, the HTTP address "
            "of earlier builds): %s",
            peer,
            self.address[0],
            self.port,
            f"redirected to {http}; point HTTP clients (rmqctl -a, scrapers, browsers) at controllerHttpAddr {http}"
            if http
            else "answered 421, this node's HTTP address (controllerHttpAddr) is unknown",
        )

    def saw_heartbeat(self, conn: _Connection, cmd: RemotingCommand) -> None:
        """Remember which connection a broker heartbeats on (RocketMQ keeps the channel per identity), from a
        header the fast path did not read (`saw_broker` takes its item's identity)."""
        ext = cmd.ext_fields
        try:
            identity = (ext["clusterName"], ext["brokerName"], int(ext["brokerId"]))
        except (KeyError, ValueError):
            return  # the answer will say what is wrong
        self.saw_broker(conn, identity)

    def saw_broker(self, conn: _Connection, identity: tuple[str, str, int]) -> None:
        if self.channels.get(identity) is not conn:  # else it is in conn.brokers already
            conn.brokers.add(identity)
            self.channels[identity] = conn

    def close_expired(self, identity: tuple[str, str, int]) -> None:
        """The scan expired this broker: forget its channel, then close that connection, as RocketMQ's
        RaftBrokerHeartBeatManager.scanNotActiveBroker does (a frozen broker that wakes up reconnects and
        heartbeats anew). Forgotten first, so no CLOSE_CHANNEL (1014) follows for it; other brokers that
        heartbeated on the same connection go through 1014 as on any close."""
        conn = self.channels.pop(identity, None)
        if conn is not None:
            log.info("broker %s/%s/%d expired: its connection from %s closed", *identity, conn.peer)
            conn.close()

    def channel_closed(self, conn: _Connection) -> None:
        """CLOSE_CHANNEL (1014) for every broker whose latest connection this was, when this node leads."""
        for identity in conn.brokers:
            if self.channels.get(identity) is not conn:
                continue
            del self.channels[identity]
            if not self.service.stopping and self.service.is_leader():
                self._spawn(self._close_channel(identity))

    async def _close_channel(self, identity: tuple[str, str, int]) -> None:
        try:
            r = await self.service.write(lambda now: commands.close_channel(now, *identity), "BROKER_CLOSE_CHANNEL")
            self.closed_channels += 1
            log.info("broker %s/%s/%d closed its connection: %s", *identity, r.body)
        except (NotLeaderError, UnavailableError) as e:
            log.warning("close-channel of broker %s/%s/%d not proposed: %s", *identity, e)
