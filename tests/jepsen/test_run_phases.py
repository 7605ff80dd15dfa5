"""`run_one`'s phases and its teardown, with a fake network, fake nodes, a fake driver and a fake nemesis runner
(no namespaces, no processes): whichever phase fails, the load and the nemesis stop, every node stops and the
network is removed, in that order, and the run reports why it was aborted."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jepsen.db import DBError
from jepsen.run import EXIT_ABORTED, EXIT_INTERRUPTED, Parts, RunConfig, run_one


class Boom(RuntimeError):
    pass


class Fakes:
    """Builds the parts of a run; every call they get lands in `calls`. `fail` names the call that raises."""

    def __init__(self, fail: str, exc: BaseException) -> None:
        self.calls: list[str] = []
        self.fail = fail
        self.exc = exc

    def hit(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail:
            raise self.exc

    def parts(self) -> Parts:
        return Parts(net=self.net, cluster=self.cluster, driver=self.driver, runner=self.runner)

    def net(self, n: int) -> Any:
        fakes = self

        class Net:
            prefix = "10.9.9"
            namespaces = [f"fake{i}" for i in range(1, n + 1)]

            def setup(self) -> None:
                fakes.hit("net.setup")

            def probe(self, port: int) -> Any:
                return SimpleNamespace(ok=True, to_json=lambda: {"ok": True})

            def teardown(self) -> list[str]:
                fakes.hit("net.teardown")
                return []

        return Net()

    def cluster(self, net: Any, out: Path, options: Any) -> Any:
        fakes = self

        class Cluster:
            token = "t"
            nodes = [SimpleNamespace(i=i, name=f"n{i}", http=f"10.9.9.{i}:9770") for i in (1, 2, 3)]

            def write_configs(self) -> None:
                fakes.hit("cluster.write_configs")

            def start_all(self) -> None:
                fakes.hit("cluster.start_all")

            def wait_ready(self, timeout: float) -> list[int]:
                fakes.hit("cluster.wait_ready")
                return []

            def leader(self) -> None:
                return None

            def check_exits(self) -> list[dict[str, Any]]:
                return []

            def close(self) -> None:
                fakes.hit("cluster.close")

            def exit_codes(self) -> dict[str, int]:
                return {"n1": 0}

        return Cluster()

    def driver(self, names: list[str], recorder: Any, make_client: Any, *args: Any) -> Any:
        fakes = self

        class Driver:
            errors: list[str] = []

            def __init__(self) -> None:
                self.halt = SimpleNamespace(set=lambda: fakes.hit("driver.halt"))

            def start(self) -> None:
                fakes.hit("driver.start")

            def stop(self) -> None:
                fakes.hit("driver.stop")

            def ops(self) -> int:
                return 0

            def final(self, deadline: float) -> dict[str, Any]:
                fakes.hit("driver.final")
                return {}

            def stats(self) -> dict[str, Any]:
                return {}

            def close(self) -> None:
                fakes.hit("driver.close")

        return Driver()

    def runner(self, ctx: Any, nemesis: Any, steps: Any, t0: float) -> Any:
        fakes = self

        class Runner:
            failed = threading.Event()
            error = error_text = None
            applied = 0

            def start(self) -> None:
                fakes.hit("runner.start")

            def finish(self) -> dict[str, Any]:
                fakes.hit("runner.finish")
                return {}

            def abandon(self) -> None:
                fakes.hit("runner.abandon")

        return Runner()


@pytest.fixture(autouse=True)
def _no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plots of an empty history are not what these tests are about (and cost a second each)."""
    monkeypatch.setattr("jepsen.plots.plot_run", lambda *a, **kw: None)


def config() -> RunConfig:
    # a short time limit: the run phase's loop waits on the fake nemesis's `failed` event until then
    return RunConfig(
        workload="register",
        nemesis="partition-random-halves",
        time_limit=0.05,
        nodes=3,
        rate=1,
        concurrency=1,
        seed=1,
        interval=10,
        recovery=1,
        snapshot_threshold=0,
        keep_data=False,
        budget=1,
    )


SETUP = ["net.setup", "cluster.write_configs", "cluster.start_all", "cluster.wait_ready"]
RUN = ["driver.start", "runner.start", "driver.stop"]
HEAL = ["runner.finish", "cluster.wait_ready", "driver.final"]
# the teardown: stop the load and the nemesis, stop the nodes, close the clients, remove the network
TEARDOWN = ["driver.halt", "runner.abandon", "cluster.close", "driver.close", "net.teardown"]


@pytest.mark.parametrize(
    ("fail", "exc", "code", "abort", "expected"),
    [
        (
            "net.setup",
            Boom("no namespaces"),
            EXIT_ABORTED,
            "harness error: Boom: no namespaces",
            ["net.setup", "net.teardown"],
        ),
        (
            "cluster.start_all",
            DBError("controllerd missing"),
            EXIT_ABORTED,
            "DBError: controllerd missing",
            SETUP[:3] + ["cluster.close", "net.teardown"],
        ),
        (
            "runner.start",
            Boom("nemesis thread"),
            EXIT_ABORTED,
            "harness error: Boom: nemesis thread",
            SETUP + RUN[:2] + TEARDOWN,
        ),
        ("driver.stop", KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted", SETUP + RUN + TEARDOWN),
        (
            "runner.finish",
            Boom("heal failed"),
            EXIT_ABORTED,
            "harness error: Boom: heal failed",
            SETUP + RUN + HEAL[:1] + TEARDOWN,
        ),
        ("driver.final", DBError("node gone"), EXIT_ABORTED, "DBError: node gone", SETUP + RUN + HEAL + TEARDOWN),
    ],
)
def test_a_failing_phase_still_stops_everything_in_order(
    tmp_path: Path, fail: str, exc: BaseException, code: int, abort: str, expected: list[str]
) -> None:
    fakes = Fakes(fail, exc)
    assert run_one(config(), tmp_path, fakes.parts()) == code
    assert fakes.calls == expected
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"] == "aborted" and results["abort"] == abort and results["exit_code"] == code
    if "cluster.close" in expected:
        assert results["run"]["final_exit_codes"] == {"n1": 0}


def test_a_run_without_failures_tears_down_after_the_heal(tmp_path: Path) -> None:
    fakes = Fakes(fail="", exc=Boom())
    code = run_one(config(), tmp_path, fakes.parts())
    assert fakes.calls == SETUP + RUN + HEAL + TEARDOWN
    results = json.loads((tmp_path / "results.json").read_text())
    # nothing to check (the fake clients did nothing) but nothing aborted: the history has the setup probe only
    assert "abort" not in results and code == 2 and results["verdict"] == "unknown"
    assert results["run"]["recovery"] == {
        "not_ready": [],
        "seconds": results["run"]["recovery"]["seconds"],
        "final_reads": "all done",
    }
