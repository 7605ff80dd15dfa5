"""The reference of the remoting heartbeat row of `python -m tools.bench all` (section `remoting`): the
controller's own remoting front end with no consensus behind it. Usage:
python -m tools.bench.bare_remoting PORT [--lean]

By default every frame goes through what a controller node runs for it (api/remoting/server.py: the
RemotingServer's connection protocol, the frame decoder, the Dispatcher parsing each header by the Java header
class's field list and building the typed request (a plain 904: decoding it straight into its 1202 item, as a
leader at feature level 2 does), the response header rendered as extFields and encoded),
on the same event loop (uvloop when installed). Only the service behind the Dispatcher is replaced: `Echo`
answers at once, without the Raft log, with the answer a controller leader gives to each code ControllerLoad
sends (interop/rocketmq/src/interop/ControllerLoad.java):

* 1005 GET_CONTROLLER_METADATA_INFO: SUCCESS, isLeader true, this server as the leader and only peer;
* 1012 GET_NEXT_BROKER_ID: SUCCESS, clusterName, brokerName, nextBrokerId: 1 for a new set, then each answer one
  more (never an id offered or applied before), so that brokers of one set registering at once all get distinct
  ids at their first try, where the controller would refuse all but one apply (2014) and have the others ask
  again;
* 1013 APPLY_BROKER_ID: SUCCESS, clusterName, brokerName (the id is taken);
* 1003 REGISTER_BROKER: SUCCESS, clusterName, brokerName, no master yet, body {"syncStateSet":[],
  "syncStateSetEpoch":0} (a registered broker set before its first election);
* 904 BROKER_HEARTBEAT: SUCCESS, remark "Heart beat success".

With --lean, the Dispatcher is bypassed as bare_app --lean bypasses FastAPI: the connection protocol and codec
still decode every frame, and the answer is that code's precomputed response (its header built once per broker
set): the cost of our framing alone, the floor under the default mode."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass

from api.remoting import headers as H
from api.remoting.codec import RemotingCommand
from api.remoting.server import RemotingServer, _Connection
from api.service import requests as Q
from api.service.settings import ApiSettings
from statemachine import codes as C
from statemachine.result import Result
from statemachine.values import JSONObject

HEARTBEAT_OK = Result(C.SUCCESS, "Heart beat success")
EMPTY_SYNC_STATE_SET = {"syncStateSet": [], "syncStateSetEpoch": 0}
EMPTY_SYNC_STATE_SET_BODY = b'{"syncStateSet":[],"syncStateSetEpoch":0}'  # as the Dispatcher renders it
CODES = (H.GET_METADATA_INFO, C.GET_NEXT_BROKER_ID, C.APPLY_BROKER_ID, C.REGISTER_BROKER, H.BROKER_HEARTBEAT)


@dataclass
class _Opts:
    request_timeout_s: float = 3.0
    group_id: str = "bare-remoting"


class Echo:
    """What the Dispatcher and the RemotingServer ask of a ControllerService, answered with no consensus: a
    leader of one node (`address`) whose broker sets are only the ids handed out (for distinct nextBrokerIds)."""

    id = "bare"

    def __init__(self, address: str) -> None:
        self.address = address
        self.opts = _Opts()
        self.listeners: list[Callable[[str, Result], None]] = []
        self.stopping = False
        self.next_ids: dict[str, int] = {}  # brokerName -> the id 1012 answers next
        self._ok: asyncio.Future[Result] | None = None  # a heartbeat's answer, done (propose_heartbeat)

    def next_id(self, name: str) -> int:
        """The id a 1012 for broker set `name` answers: never one answered or applied before."""
        n = self.next_ids.get(name, 1)
        self.next_ids[name] = n + 1
        return n

    def applied(self, name: str, broker_id: int) -> None:
        self.next_ids[name] = max(self.next_ids.get(name, 1), broker_id + 1)

    def is_leader(self) -> bool:
        return True

    def remoting_address(self, peer: str) -> str | None:
        return self.address if peer == self.id else None

    def http_address(self, peer: str) -> str | None:
        return None

    def metadata(self, remoting: bool = False) -> dict[str, object]:
        return {
            "group": self.opts.group_id,
            "controllerLeaderId": self.id,
            "controllerLeaderAddress": self.address,
            "isLeader": True,
            "peers": f"{self.address};",
        }

    def answer(self, request: Q.Request) -> Result:
        refusal = request.refusal()
        if refusal is not None:
            return refusal
        if isinstance(request, Q.BrokerHeartbeat):
            return HEARTBEAT_OK
        if isinstance(request, Q.GetNextBrokerId):
            names = {"clusterName": request.clusterName, "brokerName": request.brokerName}
            return Result(C.SUCCESS, None, names | {"nextBrokerId": self.next_id(request.brokerName)})
        if isinstance(request, Q.ApplyBrokerId):
            self.applied(request.brokerName, request.appliedBrokerId)
            return Result(C.SUCCESS, None, {"clusterName": request.clusterName, "brokerName": request.brokerName})
        if isinstance(request, Q.RegisterBroker):
            header: JSONObject = {  # a registered set before its first election: no master
                "clusterName": request.clusterName,
                "brokerName": request.brokerName,
                "masterBrokerId": None,
                "masterAddress": None,
                "masterEpoch": None,
                "syncStateSetEpoch": None,
            }
            return Result(C.SUCCESS, None, header, EMPTY_SYNC_STATE_SET)
        return Result(C.SUCCESS)

    async def submit(self, request: Q.Request) -> Result:
        return self.answer(request)

    def propose(self, request: Q.Request) -> Result:
        """A write the Dispatcher proposes without a task (a heartbeat): answered at once, never a future."""
        return self.answer(request)

    def propose_heartbeat(self, item: list[str | int], done: Callable[[asyncio.Future[Result]], None]) -> bool:
        """A plain 904 the Dispatcher decoded straight into its item (as a leader at feature level 2 takes it):
        answered at once, `done` called with a future that already holds the answer (one per loop, reused)."""
        loop = asyncio.get_running_loop()
        if self._ok is None or self._ok.get_loop() is not loop:
            self._ok = loop.create_future()
            self._ok.set_result(HEARTBEAT_OK)
        done(self._ok)
        return True

    def settled(self, fut: asyncio.Future[Result], request_type: str) -> Result:
        """The outcome of a done proposal future, the listeners told (ControllerService.settled)."""
        result = fut.result()
        for listener in self.listeners:
            listener(request_type, result)
        return result

    async def write(self, build: Callable[[int], bytes], request_type: str = "") -> Result:
        """A command the server itself proposes (CLOSE_CHANNEL when a broker's connection closes): not built,
        not proposed, answered SUCCESS."""
        return Result(C.SUCCESS)


class LeanEcho(RemotingServer):
    """The RemotingServer whose connections answer each decoded request at once, with no Dispatcher, no typed
    request and no task (--lean): the fields the answer echoes are read from the extFields as they came."""

    def __init__(self, service: Echo, address: tuple[str, int]) -> None:
        super().__init__(service, ApiSettings(), address)  # type: ignore[arg-type]  # Echo: the calls it makes
        self.echo = service
        self.metadata = H.to_ext(service.metadata(remoting=True))

    def reply(self, cmd: RemotingCommand) -> RemotingCommand:
        code = cmd.code
        if code == H.BROKER_HEARTBEAT:
            return cmd.response(C.SUCCESS, HEARTBEAT_OK.remark)
        if code == H.GET_METADATA_INFO:
            return cmd.response(C.SUCCESS, None, self.metadata)
        ext = cmd.ext_fields
        name = ext.get("brokerName", "")
        names = {"clusterName": ext.get("clusterName", ""), "brokerName": name}
        if code == C.GET_NEXT_BROKER_ID:
            return cmd.response(C.SUCCESS, None, names | {"nextBrokerId": str(self.echo.next_id(name))})
        if code == C.APPLY_BROKER_ID:
            self.echo.applied(name, int(ext.get("appliedBrokerId", "0")))
            return cmd.response(C.SUCCESS, None, names)
        if code == C.REGISTER_BROKER:
            return cmd.response(C.SUCCESS, None, names, EMPTY_SYNC_STATE_SET_BODY)
        return cmd.response(C.SUCCESS)


class _LeanConnection(_Connection):
    server: LeanEcho

    def start(self, cmd: RemotingCommand) -> None:
        if not cmd.is_oneway:
            self.send(self.server.reply(cmd))


async def serve(port: int, lean: bool, host: str = "127.0.0.1", ready: Callable[[int], None] | None = None) -> None:
    """Serve until cancelled; `ready(port)` once listening (port 0: a free one)."""
    server = await start(port, lean, host)
    if ready is not None:
        ready(server.port)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


async def start(port: int, lean: bool, host: str = "127.0.0.1") -> RemotingServer:
    """The echo server listening on host:port (port 0: a free one, then `server.port`)."""
    echo = Echo(f"{host}:{port}")
    server: RemotingServer
    if lean:
        lean_server = LeanEcho(echo, (host, port))
        await _listen(lean_server, lambda: _LeanConnection(lean_server))
        server = lean_server
    else:
        server = RemotingServer(echo, ApiSettings(), (host, port))  # type: ignore[arg-type]  # Echo: the calls it makes
        await server.start()
    if port == 0:  # the address 1005 names: the one bound
        echo.address = f"{host}:{server.port}"
        if isinstance(server, LeanEcho):
            server.metadata = H.to_ext(echo.metadata(remoting=True))
    return server


async def _listen(server: RemotingServer, factory: Callable[[], _Connection]) -> None:
    loop = asyncio.get_running_loop()
    server._server = await loop.create_server(factory, *server.address, backlog=2048)


def main(argv: list[str]) -> int:
    if not argv or not argv[0].isdigit():
        print("usage: python -m tools.bench.bare_remoting PORT [--lean]", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING)
    coro = serve(int(argv[0]), "--lean" in argv[1:])
    try:
        if importlib.util.find_spec("uvloop") is not None:  # optional, as controllerd uses it
            import uvloop  # noqa: PLC0415

            uvloop.run(coro)
        else:
            asyncio.run(coro)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
