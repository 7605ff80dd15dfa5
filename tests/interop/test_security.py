"""Real RocketMQ 5.5 with TLS and ACL against our controller (its peers on mutual TLS) in `tls.server.mode=enforcing` with required client
certificates and a `controllerAclFile` (docs/security.md): brokers that enable TLS as RocketMQ operators do
(`-Dtls.enable=true`, a `tls.config.file`) and sign with `innerClientAuthenticationCredentials` register and fail
over; mqadmin with TLS works, mqadmin without is refused, and the refusal is logged and counted; mqadmin signing
with an admin's access key (conf/tools.yml) changes the config, without a key or with a broker's key it gets
NO_PERMISSION and changes nothing. Every certificate is made by the test (tests/pki.py).

One world: our 3 nodes (controllerd processes), a NameServer and two brokers of one set, all with certificates
of the test's CA."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from cli import rocketmq
from cli.rocketmq import Broker, Deployment, port_triples, wait_until
from tools.cluster import ControllerdCluster
from tools.pki import CA

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]

KEY_PASSWORD = "controller-key-pass"
LOCAL_AUTH_PROVIDER = "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider"
USERS = """\
user.ops.secretKey=ops-secret
user.ops.role=admin
user.broker-a-ak.secretKey=a-secret
user.broker-a-ak.role=broker
user.broker-a-ak.brokerNames=broker-a
"""


@dataclass
class World:
    ours: ControllerdCluster
    rmq: Deployment
    brokers: list[Broker]
    tls_jvm: tuple[str, ...]  # mqadmin's flags to speak TLS with a client certificate
    root: str

    def mqadmin(self, who: str, *args: str) -> str:
        """mqadmin over TLS, signing as `who` ("" for nobody): its own ROCKETMQ_HOME with conf/tools.yml, where
        mqadmin reads the access key it signs with (AclUtils.getAclRPCHook)."""
        home = os.path.join(self.root, f"mqadmin-{who or 'anonymous'}")
        keys = {"ops": ("ops", "ops-secret"), "broker-a": ("broker-a-ak", "a-secret")}
        if who:
            os.makedirs(os.path.join(home, "conf"), exist_ok=True)
            with open(os.path.join(home, "conf", "tools.yml"), "w") as f:
                f.write(f"accessKey: {keys[who][0]}\nsecretKey: {keys[who][1]}\n")
        return self.rmq.mqadmin(*args, jvm=self.tls_jvm, home=home)

    def leader(self) -> int:
        def find() -> int | None:
            for i in self.ours.procs:
                body = httpx.get(self.ours.url(i, "/api/v1/raft/status"), timeout=2).json()["body"]
                if body.get("leaderId"):
                    return self.ours.index_of(body["leaderId"])
            return None

        return wait_until("a leader of our group", find, 30)

    def broker_set(self) -> dict[str, Any] | None:
        r = httpx.get(self.ours.url(self.leader(), "/ui/api/state"), timeout=5).json()
        return next((s for s in r["brokerSets"] if s["brokerName"] == "broker-a"), None)

    def settled(self, alive: int, timeout: float = 120) -> dict[str, Any]:
        """broker-a with an alive master and `alive` alive in-sync replicas."""

        def check() -> dict[str, Any] | None:
            s = self.broker_set()
            return s if rocketmq.settled(s, alive) else None

        return wait_until(f"broker-a: a master and {alive} in-sync replicas", check, timeout)

    def config(self, key: str) -> str:
        """The leader's value of a config key (GET /api/v1/admin/config, the 1010 view)."""
        return str(httpx.get(self.ours.url(self.leader(), "/api/v1/admin/config"), timeout=5).json()["body"][key])

    def refusals(self, reason: str) -> float:
        """controllerd_tls_refused_total{listener="remoting", reason} summed over our nodes."""
        total = 0.0
        for i in self.ours.procs:
            text = httpx.get(self.ours.url(i, "/metrics"), timeout=5).text
            m = re.search(
                rf'controllerd_tls_refused_total{{[^}}]*listener="remoting"[^}}]*reason="{reason}"[^}}]*}} (\S+)', text
            )
            total += float(m.group(1)) if m else 0.0
        return total


def properties_file(path: str, values: dict[str, str]) -> str:
    with open(path, "w") as f:
        f.write(rocketmq.properties(dict(values)))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    rocketmq.require()
    root = tmp_path_factory.mktemp("tls-interop")
    ca = CA(root / "pki")
    server = ca.issue("controller", password=KEY_PASSWORD)
    users = root / "users.properties"
    users.write_text(USERS)
    ours = ControllerdCluster(
        str(root / "ours"),
        election_ms=1000,
        extra=rocketmq.properties(
            {
                "scanNotActiveBrokerInterval": 1000,
                "tls.server.mode": "enforcing",
                "tls.config.file": str(root / "absent-tls.properties"),
                "tls.test.mode.enable": False,
                "tls.server.certPath": server.cert,
                "tls.server.keyPath": server.key,
                "tls.server.keyPassword": KEY_PASSWORD,
                "tls.server.need.client.auth": "require",
                "tls.server.authClient": True,
                "tls.server.trustCertPath": ca.path,
                "controllerAclFile": str(users),
            }
        ),
    )

    def jvm(name: str) -> tuple[str, ...]:
        """A RocketMQ JVM with TLS on, as RocketMQ's docs set it up: tls.enable and a tls.config.file naming
        this process's certificate (as a server: NameServer, broker; as a client: broker, mqadmin). The servers
        accept TLS in RocketMQ's default mode, permissive, which the suite's JAVA_OPT_EXT turns off (conftest.py)."""
        pair = ca.issue(name)
        conf = {
            "tls.test.mode.enable": "false",
            "tls.server.certPath": pair.cert,
            "tls.server.keyPath": pair.key,
            "tls.server.need.client.auth": "none",
            "tls.client.authServer": "true",
            "tls.client.trustCertPath": ca.path,
            "tls.client.certPath": pair.cert,
            "tls.client.keyPath": pair.key,
        }
        path = properties_file(str(root / "pki" / f"{name}-tls.properties"), conf)
        return ("-Dtls.enable=true", f"-Dtls.config.file={path}", "-Dtls.server.mode=permissive")

    for raft_id, conf in zip(ours.rafts, ours.confs, strict=True):  # peers: mutual TLS, each its own id
        peer = ca.issue(raft_id, file=f"peer-{raft_id.replace(':', '-')}")
        with open(conf, "a") as f:
            f.write(f"jRaftTlsCertPath={peer.cert}\njRaftTlsKeyPath={peer.key}\njRaftTlsTrustCertPath={ca.path}\n")
    with Deployment(str(root / "rmq")) as rmq:
        try:
            ours.start_all()
            ours.wait_ready()
            rmq.namesrv(jvm=jvm("namesrv"))
            ports = port_triples(2)
            brokers = [
                rmq.broker(
                    "broker-a",
                    p,
                    ours.remotings,
                    index=i,
                    jvm=jvm(f"broker-a-{i}"),
                    # what the broker signs its requests with (BrokerOuterAPI's AclClientRPCHook); RocketMQ then
                    # also keeps that user in its own store, hence a metadata provider
                    innerClientAuthenticationCredentials='{"accessKey":"broker-a-ak","secretKey":"a-secret"}',
                    authenticationMetadataProvider=LOCAL_AUTH_PROVIDER,
                )
                for i, p in enumerate(ports)
            ]
            for b in brokers:
                b.start()
            for b in brokers:
                b.wait_line(r"The broker\[.*boot success", 180)
            yield World(ours, rmq, brokers, jvm("mqadmin"), str(root))
        finally:
            ours.stop_all()


def test_tls_brokers_register_and_fail_over_through_an_enforcing_controller(world: World) -> None:
    s = world.settled(alive=2)
    old = next(b for b in world.brokers if b.identity() == s["masterBrokerId"])
    old.kill()

    def elected() -> dict[str, Any] | None:
        n = world.broker_set()
        return n if n is not None and n["masterBrokerId"] not in (None, s["masterBrokerId"]) else None

    new = wait_until("broker-a: the other broker elected", elected, 60)
    assert new["masterEpoch"] > s["masterEpoch"]
    survivor = next(b for b in world.brokers if b is not old)
    assert new["masterAddress"] == survivor.addr
    survivor.wait_log(r"(?i)change to master|role.*MASTER", timeout=60)
    old.start_and_wait()  # back as a slave, over TLS again
    world.settled(alive=2)
    assert world.refusals("plain_on_enforcing") == 0  # every broker connection was TLS


def test_mqadmin_with_tls_works_and_without_is_refused(world: World) -> None:
    leader = world.leader()
    follower = world.ours.remotings[(leader + 1) % 3]
    meta = world.rmq.mqadmin("getControllerMetaData", "-a", follower, jvm=world.tls_jvm)
    assert f"#ControllerLeaderAddress\t{world.ours.remotings[leader]}" in meta, meta
    before = world.refusals("plain_on_enforcing")
    plain = world.rmq.mqadmin("getControllerMetaData", "-a", follower)
    assert "#ControllerLeaderAddress" not in plain, plain
    wait_until("the plain mqadmin counted", lambda: world.refusals("plain_on_enforcing") > before, 10)
    log = open(world.ours.log_path((leader + 1) % 3)).read()
    assert re.search(r"remoting connection from 127\.0\.0\.1:\d+ refused: a plain connection", log), log[-2000:]


def test_sighup_reloads_the_certificates_without_a_restart(world: World) -> None:
    path = world.ours.log_path(0)
    mark = os.path.getsize(path)

    def reloaded() -> bool:
        with open(path, "rb") as f:
            f.seek(mark)
            return b"remoting TLS certificates loaded from" in f.read()

    world.ours.procs[0].send_signal(signal.SIGHUP)
    wait_until("node 0 logs its reload", reloaded, 10)
    assert world.ours.procs[0].poll() is None
    world.settled(alive=2)  # the brokers' connections went on


def test_mqadmin_needs_an_admin_key_to_change_state_and_a_broker_key_cannot_clean_a_set(world: World) -> None:
    leader = world.ours.remotings[world.leader()]
    update = ("updateControllerConfig", "-a", leader, "-k", "enableElectUncleanMaster", "-v", "true")
    out = world.mqadmin("", *update)
    assert "update controller config success" not in out and "changes state and needs a signed request" in out, out
    out = world.mqadmin("broker-a", *update)
    assert "success" not in out and "(role broker) may not send request 1009" in out, out
    assert world.config("enableElectUncleanMaster") == "false"  # unchanged
    out = world.mqadmin("ops", *update)
    assert "update controller config success" in out, out
    assert world.config("enableElectUncleanMaster") == "true"

    s = world.settled(alive=2)
    clean = ("cleanBrokerMetadata", "-a", leader, "-c", "DefaultCluster", "-b", "1;2", "-l")
    for who, name in (("broker-a", "broker-b"), ("", "broker-a")):
        out = world.mqadmin(who, *clean, "-bn", name)
        assert "success" not in out, (who, name, out)
        assert re.search(r"CODE: 16\b", out), (who, name, out)
    assert world.settled(alive=2)["masterEpoch"] == s["masterEpoch"]  # nothing was cleaned or re-elected
