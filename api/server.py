"""ControllerServer: a controller node plus its HTTP endpoints, inside the caller's asyncio loop.

This is the embeddable API (RocketMQ embeds its controller in the NameServer the same way):

    from api.server import ControllerServer
    server = ControllerServer(service_options, ApiSettings(admin_token=...), ("127.0.0.1", 9770))
    await server.start()        # binds HTTP first (fails fast on a busy port), then starts the node
    ...                         # the host application keeps running; server.service is the node
    await server.stop()         # leadership transfer, HTTP shutdown, node stop (log flushed)

`controllerd` is this plus config parsing, logging and signal handling (cli/controllerd.py). Uvicorn runs in
the same loop as the Raft node: no threads between a request and its proposal, and uvloop (when installed)
speeds up both.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import socket
import sys
from collections.abc import Generator
from urllib.parse import parse_qs

import uvicorn
from starlette.types import Receive, Scope, Send

from api.export import MetricsExporter
from api.http.app import create_app
from api.http.hotpath import HeartbeatPath
from api.remoting.server import RemotingServer
from api.service import ControllerService, ServiceOptions
from api.service.metrics import ControllerMetrics
from api.service.settings import ApiSettings
from api.service.tls import ServerTls, TlsAcceptor

log = logging.getLogger("controllerd")


GC_THRESHOLDS = (20_000, 20, 100)
"""Collector thresholds of a process that is one controller node (`settle_gc`). Python's default (700, 10, 10)
ran a young collection every ~700 net container allocations, which promoted the requests in flight (64
connections' scopes, tasks and futures) into the old generations, and a full collection of the leader's
~100k objects every second or so: up to 150 ms with the loop stopped, the heartbeats' p99
(docs/performance.md, "Where the time goes")."""


def settle_gc() -> None:
    """For a process whose job is this node, once it has started: move every object alive now (modules, the
    FastAPI app and its schemas, the loaded state) to the collector's permanent generation, which full
    collections no longer walk, and collect young objects less often (GC_THRESHOLDS). Garbage without
    cycles is freed by reference counting as before; only a cycle among objects alive at this call would
    never be collected. The embedding application decides for its own process: `controllerd` calls this."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


SWITCH_INTERVAL_S = 0.001
"""How long a thread of a controller node's process may hold the interpreter while another waits for it
(`settle_switch_interval`); Python's default is 5 ms. A scrape formats and gzips /metrics in a worker thread
for ~250 ms at 10,000 brokers, and each time the event loop wants the interpreter back it waited up to 5 ms:
the realistic row's p99 with a scrape of every node every 5 s was 82 ms at 5 ms and 24 ms at 1 ms, and the
same without scrapes (docs/performance.md, "The switch interval"). 0.5 ms was worse with a hashing thread."""


def settle_switch_interval() -> None:
    """For a process whose job is this node: a thread that holds the interpreter while the event loop waits
    for it gives it up after SWITCH_INTERVAL_S. The embedding application decides for its own process:
    `controllerd` calls this beside `settle_gc`."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


class _EmbeddedUvicorn(uvicorn.Server):
    """Uvicorn that leaves signals to the host application."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def bind(address: tuple[str, int]) -> socket.socket:
    """The listening socket for HTTP; OSError names the address."""
    host, port = address
    try:
        return socket.create_server(
            (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=2048
        )
    except OSError as e:
        raise OSError(e.errno, f"cannot listen for HTTP on {host}:{port}: {e.strerror}") from None


class _PromExporter:
    """metricsExporterType=PROM: the node's series in Prometheus text format on metricsPromExporterHost:Port
    (every path, as RocketMQ's PrometheusHttpServer), read on the node's loop and formatted in a worker thread
    (ControllerMetrics.exposition), with prometheus_client's choices: `name[]`, OpenMetrics when Accept asks for
    it, gzip when Accept-Encoding takes it."""

    def __init__(self, metrics: ControllerMetrics, address: tuple[str, int]) -> None:
        self.address = address

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                return
            names = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("name[]", [])

            def header(name: bytes) -> str:  # repeated ones joined, as prometheus_client's own app does
                return ",".join(v.decode("latin-1") for k, v in scope["headers"] if k.lower() == name)

            body, headers = await metrics.exposition(names, header(b"accept"), header(b"accept-encoding"))
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
                }
            )
            await send({"type": "http.response.body", "body": body})

        self._config = uvicorn.Config(app, loop="none", lifespan="off", access_log=False, log_config=None)
        self._server: _EmbeddedUvicorn | None = None
        self._main: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None

    async def start(self) -> None:
        host, port = self.address
        try:
            self._sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
        except OSError as e:
            raise OSError(
                e.errno, f"cannot listen for metricsPromExporterPort on {host}:{port}: {e.strerror}"
            ) from None
        self._config.load()
        server = _EmbeddedUvicorn(self._config)
        server.lifespan = self._config.lifespan_class(self._config)
        await server.startup(sockets=[self._sock])
        self._server = server
        self._main = asyncio.get_running_loop().create_task(server.main_loop(), name="metrics-prom")
        log.info("serving metrics (metricsExporterType=PROM) on http://%s:%d/metrics", host, port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            if self._main is not None:
                await self._main
            await self._server.shutdown(sockets=[self._sock] if self._sock else None)
            self._server = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class ControllerServer:
    def __init__(
        self,
        options: ServiceOptions,
        settings: ApiSettings,
        address: tuple[str, int],
        *,
        access_log: bool = False,
        remoting_address: tuple[str, int] | None = None,
    ) -> None:
        self.service = ControllerService(options)
        self.settings = settings
        self.address = address
        self.app = create_app(self.service, settings)
        self.remoting = (
            RemotingServer(self.service, settings, remoting_address, self.app.state.gateway.metrics)
            if remoting_address is not None
            else None
        )
        self._config = uvicorn.Config(
            HeartbeatPath(self.app),  # broker heartbeats answered without the framework (api/http/hotpath.py)
            loop="none",  # the caller's loop
            http="httptools",
            lifespan="off",
            proxy_headers=False,  # nothing reads the client address; saves a middleware per request
            access_log=access_log,
            log_config=None,  # the host's logging configuration
            timeout_graceful_shutdown=5,
            limit_concurrency=settings.max_connections,
            # uvicorn annotates an int but only hands it to loop.call_later, which takes seconds as a float
            timeout_keep_alive=settings.keep_alive_s,  # type: ignore[arg-type]
        )
        https = dataclasses.replace(settings.remoting_tls, mode="enforcing")
        self.http_tls = ServerTls(https, "HTTP") if settings.http_tls else None
        self._acceptor: TlsAcceptor | None = None  # HTTPS: TLS terminated by us, per connection (TlsAcceptor)
        self._http: _EmbeddedUvicorn | None = None
        self._main: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None
        metrics = self.app.state.gateway.metrics
        self.exporter = MetricsExporter(metrics, settings.metrics_export)
        self._prom: _PromExporter | None = None
        if settings.metrics_export.exporter_type == "PROM":
            export = settings.metrics_export
            self._prom = _PromExporter(metrics, (export.prom_host or "0.0.0.0", export.prom_port))

    async def start(self) -> None:
        self._sock = bind(self.address)
        try:
            if self._prom is not None:
                await self._prom.start()
            if self.remoting is not None:
                await self.remoting.start()  # the same loop as HTTP and the node
            await self.service.start()
        except BaseException:
            self._sock.close()
            if self._prom is not None:
                await self._prom.stop()
            if self.remoting is not None:
                await self.remoting.stop()
            raise
        self.exporter.start()
        self._config.load()
        if not self._config.access_log:
            # Uvicorn logs access lines whenever "uvicorn.access" has a handler, including the root's through
            # propagation (a host's logging setup): off means off, it costs ~5% of request throughput.
            logging.getLogger("uvicorn.access").propagate = False
            logging.getLogger("uvicorn.access").handlers = []
        else:
            logging.getLogger("uvicorn.access").propagate = True  # to the host's (or controllerd's) handlers
        http = _EmbeddedUvicorn(self._config)
        http.lifespan = self._config.lifespan_class(self._config)
        if self.http_tls is None:
            await http.startup(sockets=[self._sock])
        else:
            # HTTPS: uvicorn gets no socket and no ssl; our accept loop does each handshake with the current
            # context (a reloaded certificate or CA applies to the next connection), logs and counts every
            # refusal, and hands the TLS connection to the protocol uvicorn's own listener would have built.
            await http.startup(sockets=[])
            config, loop, metrics = self._config, asyncio.get_running_loop(), self.app.state.gateway.metrics

            def protocol() -> asyncio.Protocol:
                return config.http_protocol_class(  # type: ignore[call-arg]
                    config=config, server_state=http.server_state, app_state=http.lifespan.state, _loop=loop
                )

            self._acceptor = TlsAcceptor(self.http_tls, "HTTP", protocol, lambda r: metrics.tls_refused("http", r))
            self._acceptor.start(self._sock)
        self._http = http
        self._main = asyncio.get_running_loop().create_task(http.main_loop(), name="http")
        host, port = self.address
        scheme = "https" if self.http_tls is not None else "http"
        log.info("serving HTTP on %s://%s:%d (raft %s)", scheme, host, port, self.service.id)

    def reload_tls(self) -> None:
        """SIGHUP: rebuild the remoting and HTTPS certificates now (a change of their files does it anyway)."""
        for tls in (self.remoting.tls if self.remoting is not None else None, self.http_tls):
            if tls is not None:
                tls.reload()

    async def stop(self) -> None:
        """Leadership first (while HTTP still answers 2007 with the new leader), then HTTP, then the node."""
        svc = self.service
        if svc.is_leader():
            await svc.hand_over()
        if self._acceptor is not None:
            await self._acceptor.stop()  # no new connection; the served ones are uvicorn's to close
            self._acceptor = None
        if self._http is not None:
            self._http.should_exit = True
            if self._main is not None:
                await self._main
            await self._http.shutdown(sockets=[self._sock] if self._sock else None)
            self._http = None
        if self.remoting is not None:
            await self.remoting.stop()
        await self.exporter.stop()
        if self._prom is not None:
            await self._prom.stop()
        await svc.stop(transfer=False)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
