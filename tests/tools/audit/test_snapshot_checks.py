"""The audit's driver-side snapshot meta checks (tools/audit/pipeline.py `_snapshot_checks`), without Spark: a
snapshot meta's term and configuration against what the logs hold at its index."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tools.audit.model import Finding
from tools.audit.pipeline import _snapshot_checks

Confs = list[tuple[int, int, tuple[str, ...], tuple[str, ...]]]


def checks(snapshot: Any, terms: dict[int, int], confs: Confs) -> list[Finding]:
    """Node 1 (n1, group g) holds `snapshot` at index 10; its log has `terms` (node -> term) at index 10 and the
    CONF entries `confs` (index, term, voters, learners)."""
    findings: list[Finding] = []
    scan: Any = SimpleNamespace(confs=confs)  # a ScanOut as far as the checks read one
    _snapshot_checks(
        [],
        {1: "n1", 2: "n2", 3: "n3"},
        {1: "g", 2: "g", 3: "g"},
        {(1, 10): snapshot},
        {("g", 10): terms},
        {},
        {1: [scan]},
        findings,
    )
    return findings


def snap(term: int = 2, voters: tuple[str, ...] = ("a", "b", "c"), learners: tuple[str, ...] = ()) -> Any:
    return SimpleNamespace(uri="/d/n1/snapshot/s10", term=term, voters=voters, learners=learners, digests={})


ABC: Confs = [(5, 2, ("c", "b", "a"), ())]


def test_a_meta_that_agrees_with_the_log_is_no_finding() -> None:
    assert checks(snap(), {1: 2}, ABC) == []


def test_a_meta_whose_term_the_log_contradicts() -> None:
    (f,) = checks(snap(term=3), {1: 2}, ABC)
    assert (f.check, f.node, f.path, f.snapshot_index, f.snapshot_term) == (
        "snapshot.meta",
        "n1",
        "/d/n1/snapshot/s10",
        10,
        3,
    )
    assert (f.field, f.snapshot_value, f.replayed_value, f.log_index) == ("lastIncludedTerm", "3", "2", 10)


def test_without_its_own_entry_the_majority_of_the_others_is_the_basis() -> None:
    (f,) = checks(snap(term=3), {2: 2, 3: 2}, ABC)
    assert f.replayed_value == "2" and "the log of n2, n3 has term 2" in f.detail


def test_a_meta_whose_configuration_differs_from_the_conf_entry_in_force() -> None:
    later: Confs = [*ABC, (8, 2, ("a", "b"), ("c",)), (12, 2, ("a",), ())]  # 12 is past the snapshot: not in force
    (f,) = checks(snap(), {1: 2}, later)
    assert (f.check, f.node, f.snapshot_index, f.snapshot_term, f.log_index) == ("snapshot.meta", "n1", 10, 2, 8)
    assert (f.field, f.snapshot_value, f.replayed_value) == (
        "voters/learners",
        '[["a", "b", "c"], []]',
        '[["a", "b"], ["c"]]',
    )
