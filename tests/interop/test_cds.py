"""The class-data archives `make rocketmq` writes (cli/rocketmq.py, `train_cds`): every JVM kind that has one
starts with the harness's own flags and classpath and maps RocketMQ's classes from it. A JVM whose archive does
not match its classpath or its JDK ignores it silently, so only the JVM's own class-loading log can tell."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import rocketmq

MAINS = {
    "namesrv": "org.apache.rocketmq.namesrv.NamesrvStartup",
    "broker": "org.apache.rocketmq.broker.BrokerStartup",
    "controller": "org.apache.rocketmq.controller.ControllerStartup",
    "tools": "org.apache.rocketmq.tools.command.MQAdminStartup",
}


@pytest.mark.interop
@pytest.mark.parametrize("kind", rocketmq.CDS_KINDS)
def test_each_kind_maps_its_classes_from_its_archive(kind: str, tmp_path: Path) -> None:
    rocketmq.require()
    log = tmp_path / "classes.log"
    p = rocketmq.JavaProcess(kind, kind, MAINS[kind], ["-h"], str(tmp_path), jvm=(f"-Xlog:class+load=info:file={log}",))
    p.start()
    assert p.wait(120) == 0, p.tail()
    ours = [line for line in log.read_text().splitlines() if " org.apache.rocketmq." in line]
    main = [line for line in ours if f" {MAINS[kind]} source: " in line]
    assert main and main[0].endswith("source: shared objects file (top)"), main or ours[:5]
    shared = [line for line in ours if line.endswith("source: shared objects file (top)")]
    assert len(shared) == len(ours), [line for line in ours if line not in shared][:5]


def test_no_archive_for_benchmark_peers_or_when_none_was_built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """RocketMQ's controllers as benchmark peers start as its scripts start them; a missing archive is no flag."""
    monkeypatch.setattr(rocketmq, "CDS_DIR", str(tmp_path))
    assert rocketmq.cds_flags("broker") == [] and rocketmq.cds_flags("peer") == []
    (tmp_path / "broker.jsa").write_bytes(b"x")
    assert rocketmq.cds_flags("broker")[0] == f"-XX:SharedArchiveFile={tmp_path / 'broker.jsa'}"
    assert rocketmq.cds_flags("peer") == [] and rocketmq.cds_flags("load") == []
