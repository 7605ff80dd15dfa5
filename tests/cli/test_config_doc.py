"""docs/config.md's key table is generated from the key declarations (cli.config.keys_table): the doc and the
declarations must not drift apart. Regenerate the table with `python -m cli.config docs/config.md`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from api.service import ServiceOptions
from api.service.settings import ApiSettings
from cli.config import KEYS, KEYS_TABLE_HEADER, ControllerConfig, controller_conf, keys_table_rows, parse_config
from raft.options import SETTING, NodeOptions, RaftOptions, SnapshotOptions, file_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"
FIX = "regenerate it with `python -m cli.config docs/config.md`"


def doc_rows() -> dict[str, str]:
    lines = DOC.read_text().split("\n")
    start = lines.index(KEYS_TABLE_HEADER[0])
    assert lines[start + 1] == KEYS_TABLE_HEADER[1]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows[line.split("|")[1].strip().strip("`")] = line
    return rows


def test_the_doc_table_is_the_declarations() -> None:
    doc, declared = doc_rows(), keys_table_rows()
    missing = [k for k in declared if k not in doc]
    assert not missing, f"docs/config.md lacks the key(s) {', '.join(missing)}: {FIX}"
    extra = [k for k in doc if k not in declared]
    assert not extra, f"docs/config.md has undeclared key(s) {', '.join(extra)}: {FIX}"
    for key, row in declared.items():
        assert doc[key] == row, f"docs/config.md's row of {key} differs from its declaration: {FIX}"
    assert list(doc) == list(declared), f"docs/config.md lists the keys in another order: {FIX}"


def test_each_key_is_declared_once_and_a_lower_layers_default_is_the_keys() -> None:
    """A key that a lower layer's options read with the same meaning is declared on that field (its default
    is the field's), and ControllerConfig refers to the same declaration."""
    owners: dict[str, list[str]] = {}
    for cls in (NodeOptions, RaftOptions, SnapshotOptions, ServiceOptions, ApiSettings, ControllerConfig):
        for f in dataclasses.fields(cls):
            if SETTING in f.metadata and cls is not ControllerConfig:
                owners.setdefault(f.metadata[SETTING].key, []).append(f"{cls.__name__}.{f.name}")
                assert f.metadata[SETTING].default == file_text(f.default), f.name
    assert all(len(v) == 1 for v in owners.values()), owners
    by_key = {s.key: s for s in KEYS}
    assert set(owners) <= set(by_key)
    assert SnapshotOptions().threshold_entries == int(by_key["statemachineSnapshotThreshold"].default or "")


def test_the_writer_spells_rocketmq_names_and_refuses_an_unknown_key(tmp_path: Path) -> None:
    text = controller_conf(
        {
            "jRaftServerId": "127.0.0.1:9880",
            "jRaftInitConf": ["127.0.0.1:9880"],
            "jRaftControllerRPCAddr": ("127.0.0.1:10770",),
            "controllerHttpAddr": None,
            "jRaftCheckQuorum": True,
            "configBlackList": ("configBlackList", "configStorePath", "x"),
            "statemachineSnapshotThreshold": 0,
        },
        header=["generated"],
        comments={"controllerHttpAddr": "left out"},
    )
    assert text.splitlines()[:5] == [
        "# generated",
        "jRaftServerId=127.0.0.1:9880",
        "jRaftInitConf=127.0.0.1:9880",
        "jRaftControllerRPCAddr=127.0.0.1:10770",
        "# left out",
    ]
    cfg, _ = parse_config(text)
    assert cfg.check_quorum and cfg.snapshot_threshold == 0 and cfg.config_black_list[-1] == "x"
    with pytest.raises(ValueError, match="unknown controller.conf key jraftServerId .did you mean jRaftServerId"):
        controller_conf({"jraftServerId": "127.0.0.1:9880"})
