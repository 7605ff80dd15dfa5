"""tools/bench/rust_peer.py, rocketmq-rust's controller as a peer of the peers benchmark: its config files,
argv, environment and readiness check (pure), the group's process handling against a stand-in shell script (the
real binary takes ~47 min to build: `make rocketmq-rust`), and how tools/bench/peers.py takes it in."""

from __future__ import annotations

import importlib
import json
import os
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.bench import peers, rust_peer

REMOTINGS = ["127.0.0.1:20001", "127.0.0.1:20002", "127.0.0.1:20003"]
RAFTS = ["127.0.0.1:20011", "127.0.0.1:20012", "127.0.0.1:20013"]
RUN = Path(__file__).resolve().parents[3] / "docs" / "bench-peers-2026-11-27-alone.json"


def test_each_node_has_its_own_id_addresses_and_store_and_every_peer_of_both_kinds() -> None:
    conf = tomllib.loads(rust_peer.config(2, "/d/n1", "/d/n1/store", REMOTINGS, RAFTS))

    assert conf["nodeId"] == 2
    assert conf["listenAddr"] == "127.0.0.1:20002"  # the remoting port brokers use
    assert conf["storagePath"] == "/d/n1/store"
    assert conf["rocketmqHome"] == "/d/n1"  # the binary refuses to start without one
    assert conf["configStorePath"] == "/d/n1/controller.properties"  # not ~/controller
    assert conf["electionTimeoutMs"] == 1000
    assert conf["scanNotActiveBrokerInterval"] == 1000  # as the JVM peers (cli/rocketmq.py)
    assert conf["raftPeers"] == [{"id": k, "addr": a} for k, a in enumerate(RAFTS, 1)]
    # what GET_CONTROLLER_METADATA_INFO answers as the leader's address: the remoting one, not the raft one
    assert conf["controllerPeers"] == [{"id": k, "addr": a} for k, a in enumerate(REMOTINGS, 1)]


def test_config_takes_the_election_timeout_and_extra_settings_over_the_defaults() -> None:
    conf = tomllib.loads(
        rust_peer.config(
            1, "/h", "/s", REMOTINGS, RAFTS, election_ms=300, extra={"scanNotActiveBrokerInterval": 5000, "x": True}
        )
    )

    assert (conf["electionTimeoutMs"], conf["scanNotActiveBrokerInterval"], conf["x"]) == (300, 5000, True)


@pytest.mark.parametrize("node_id", [0, 4])
def test_config_refuses_a_node_outside_the_group(node_id: int) -> None:
    with pytest.raises(ValueError):
        rust_peer.config(node_id, "/h", "/s", REMOTINGS, RAFTS)


def test_config_refuses_address_lists_of_different_lengths() -> None:
    with pytest.raises(ValueError):
        rust_peer.config(1, "/h", "/s", REMOTINGS, RAFTS[:2])


def test_toml_strings_are_escaped_and_unknown_types_refused() -> None:
    path = 'C:\\a "b"'
    assert tomllib.loads(f"v = {rust_peer.toml_value(path)}")["v"] == path
    assert rust_peer.toml_value(False) == "false" and rust_peer.toml_value(7) == "7"
    with pytest.raises(TypeError):
        rust_peer.toml_value(1.5)


def test_argv_and_environment() -> None:
    base = {"PATH": "/bin", "ROCKETMQ_HOME": "/elsewhere"}

    env = rust_peer.environment(base, "/d/n0")

    assert rust_peer.argv("/b/rocketmq-controller-rust", "/d/n0/controller.toml") == [
        "/b/rocketmq-controller-rust",
        "-c",
        "/d/n0/controller.toml",
    ]
    # a group of several nodes is initialised only with this set (controller_bootstrap.rs)
    assert env == {"PATH": "/bin", "ROCKETMQ_HOME": "/d/n0", "ROCKETMQ_CONTROLLER_AUTO_INITIALIZE_CLUSTER": "true"}
    assert base["ROCKETMQ_HOME"] == "/elsewhere"


def test_ready_only_on_this_starts_line_colours_and_all() -> None:
    line = b"\x1b[2m2026-11-27T23:46:16Z\x1b[0m \x1b[32m INFO\x1b[0m main: Controller started successfully!\n"
    first = b"starting\n" + line

    assert rust_peer.started_since(first, 0)
    assert not rust_peer.started_since(first + b"starting again\n", len(first))  # the earlier start's line
    assert rust_peer.started_since(first + line, len(first))
    assert not rust_peer.started_since(b"Controller started successfully", 0)


def executable(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def no_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(rust_peer.ENV, raising=False)
    monkeypatch.setattr(rust_peer, "BUILT", str(tmp_path / "absent"))


def test_the_binary_is_the_environments_then_the_built_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = executable(tmp_path / "built", "#!/bin/sh\n")
    named = executable(tmp_path / "named", "#!/bin/sh\n")
    plain = tmp_path / "plain"
    plain.write_text("")
    monkeypatch.setattr(rust_peer, "BUILT", built)

    monkeypatch.delenv(rust_peer.ENV, raising=False)
    assert rust_peer.binary() == built and rust_peer.available()
    monkeypatch.setenv(rust_peer.ENV, named)
    assert rust_peer.binary() == named
    monkeypatch.setenv(rust_peer.ENV, str(plain))  # not executable
    assert rust_peer.binary() is None and not rust_peer.available()


@pytest.mark.usefixtures("no_binary")
def test_a_group_without_the_binary_says_how_to_build_it(tmp_path: Path) -> None:
    assert not rust_peer.available()
    with pytest.raises(RuntimeError, match="make rocketmq-rust"):
        rust_peer.RustControllers(str(tmp_path))


# A stand-in for the binary: it prints what it was given, then the readiness line, and stays (exec: same pid).
STAND_IN = """#!/bin/sh
echo "args=$* auto=$ROCKETMQ_CONTROLLER_AUTO_INITIALIZE_CLUSTER home=$ROCKETMQ_HOME cwd=$(pwd)"
printf '\\033[32m INFO\\033[0m Controller started successfully!\\n'
exec sleep 60
"""


def alive(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(rust_peer.ENV, executable(tmp_path / "rocketmq-controller-rust", STAND_IN))
    yield str(tmp_path / "group")


@pytest.mark.slow
def test_start_kill_restart_and_stop_every_node(stand_in: str) -> None:
    with rust_peer.RustControllers(stand_in) as g:
        pids = [g.pid(i) for i in range(3)]
        assert all(alive(p) for p in pids)
        assert len(set(g.remotings)) == 3 and len(set(g.rafts)) == 3
        log = Path(g.log(1)).read_text()
        assert f"args=-c {g.conf(1)} auto=true home={g.homes[1]} cwd={g.homes[1]}" in log
        assert tomllib.loads(Path(g.conf(1)).read_text())["listenAddr"] == g.remotings[1]
        assert g.store(1) == os.path.join(stand_in, "n1", "store")

        g.kill(1)
        assert not os.path.exists(f"/proc/{pids[1]}") or not alive(pids[1])
        with pytest.raises(RuntimeError, match="not running"):
            g.pid(1)
        g.start(1)  # the same config, so the same ports and store
        assert g.pid(1) != pids[1] and alive(g.pid(1))
        assert Path(g.log(1)).read_text().count("started successfully") == 2  # appended, not overwritten
        pids[1] = g.pid(1)
    assert not any(os.path.exists(f"/proc/{p}") and alive(p) for p in pids)


@pytest.mark.slow
def test_every_node_stopped_when_the_block_fails(stand_in: str) -> None:
    with pytest.raises(KeyError), rust_peer.RustControllers(stand_in) as g:
        pids = [g.pid(i) for i in range(3)]
        raise KeyError
    assert not any(os.path.exists(f"/proc/{p}") and alive(p) for p in pids)


@pytest.mark.slow
def test_a_node_that_exits_fails_the_start_with_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rust_peer.ENV, executable(tmp_path / "bin", "#!/bin/sh\necho 'Error: bad config'\nexit 3\n"))

    with (
        pytest.raises(RuntimeError, match=r"exited \(3\)[\s\S]*bad config"),
        rust_peer.RustControllers(str(tmp_path / "group")),
    ):
        pass


@pytest.fixture
def reload_peers() -> Iterator[None]:
    yield
    importlib.reload(peers)  # back to this machine's own SYSTEMS


@pytest.mark.usefixtures("reload_peers")
def test_peers_knows_rust_only_when_its_binary_is_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rust_peer, "BUILT", str(tmp_path / "absent"))
    monkeypatch.delenv(rust_peer.ENV, raising=False)
    importlib.reload(peers)
    assert list(peers.SYSTEMS) == ["ours", "jraft", "dledger"]
    assert peers.parse([]).systems == "ours,jraft,dledger"
    assert peers.main(["--systems", "rust"]) == 2  # unknown here

    monkeypatch.setenv(rust_peer.ENV, executable(tmp_path / "bin", "#!/bin/sh\n"))
    importlib.reload(peers)
    assert list(peers.SYSTEMS) == ["ours", "jraft", "dledger", "rust"]
    assert peers.parse([]).systems == "ours,jraft,dledger,rust"
    assert "through the Raft log" in peers.DEFAULTS["rust"] and "rust" not in peers.NOTES  # heartbeats in its log


@pytest.mark.usefixtures("no_binary")
def test_an_earlier_runs_rust_column_shows_without_the_binary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(RUN.read_text())
    doc["rounds"] += [{**r, "system": "rust"} for r in doc["rounds"] if r["system"] == "ours"]
    doc["rows"] = peers.summarize(doc["rounds"], ["ours", "jraft", "dledger", "rust"])
    doc["defaults"]["rust"] = peers.DEFAULTS["rust"]
    run = tmp_path / "run.json"
    run.write_text(json.dumps(doc))

    assert peers.main(["--from", str(run)]) == 0

    out = capsys.readouterr().out
    assert "rust/jraft" in out and f"  rust: {peers.DEFAULTS['rust']}" in out
