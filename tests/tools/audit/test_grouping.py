"""Grouping (tools/audit/grouping.py) on hand-made evidence: shared configurations, IDENTITY's group id where
no configuration contradicts it, and the nodes that cannot be placed."""

from __future__ import annotations

from tools.audit.grouping import Config, Evidence, place

A = ("10.0.0.1:9880", "10.0.0.2:9880", "10.0.0.3:9880")
B = ("10.0.1.1:9880", "10.0.1.2:9880", "10.0.1.3:9880")


def conf(voters: tuple[str, ...], index: int = 0) -> tuple[int, Config]:
    return index, (tuple(sorted(voters)), ())


def ev(nid: int, node: str | None, group: str | None, *configs: tuple[int, Config]) -> Evidence:
    return Evidence(nid, node or f"dir{nid}", node, group, list(configs))


def test_nodes_naming_one_group_with_no_configuration_are_one_group() -> None:
    """What `make run` leaves when no conf is found: three fresh nodes, no CONF entry, no snapshot."""
    p = place([ev(i, A[i], "jRaft-Controller") for i in range(3)])
    assert p.group_of == {0: "jRaft-Controller", 1: "jRaft-Controller", 2: "jRaft-Controller"}
    assert p.unplaced == {}


def test_the_initial_configuration_joins_nodes_that_have_no_identity() -> None:
    p = place([ev(i, None, None, conf(A)) for i in range(3)])
    assert set(p.group_of.values()) == {",".join(sorted(A))} and p.unplaced == {}


def test_two_clusters_with_one_group_id_stay_apart_by_their_configurations() -> None:
    nodes = [ev(i, A[i], "jRaft-Controller", conf(A)) for i in range(3)]
    nodes += [ev(3 + i, B[i], "jRaft-Controller", conf(B, 5)) for i in range(3)]
    p = place(nodes)
    assert {p.group_of[i] for i in range(3)} == {f"jRaft-Controller[{','.join(sorted(A))}]"}
    assert {p.group_of[i] for i in range(3, 6)} == {f"jRaft-Controller[{','.join(sorted(B))}]"}
    assert p.unplaced == {}


def test_a_node_without_configuration_joins_the_one_group_of_its_id() -> None:
    """A new member whose log is still empty: its IDENTITY places it; no configuration contradicts it."""
    nodes = [ev(i, A[i], "g", conf(A, 1)) for i in range(2)] + [ev(2, A[2], "g")]
    assert place(nodes).group_of == {0: "g", 1: "g", 2: "g"}


def test_a_configuration_naming_a_node_of_the_other_side_is_no_contradiction() -> None:
    """Node 2 holds only a later configuration (its log compacted, a snapshot's voters) that still names
    node 0: one group."""
    nodes = [
        ev(0, A[0], "g", conf(A, 1)),
        ev(1, A[1], "g", conf(A, 1)),
        ev(2, "10.0.0.9:9880", "g", conf((A[0], "10.0.0.9:9880"), 40)),
    ]
    assert set(place(nodes).group_of.values()) == {"g"}


def test_a_node_with_nothing_to_place_it_is_unplaced_not_a_silent_group() -> None:
    nodes = [ev(i, A[i], "g", conf(A)) for i in range(2)] + [ev(2, None, None)]
    p = place(nodes)
    assert list(p.unplaced) == [2] and "no IDENTITY file" in p.unplaced[2]
    assert p.group_of[2] == "unplaced[dir2]" and p.group_of[0] == p.group_of[1] == "g"


def test_a_node_whose_id_two_separate_groups_hold_is_unplaced() -> None:
    nodes = [ev(i, A[i], "g", conf(A)) for i in range(2)] + [ev(2 + i, B[i], "g", conf(B)) for i in range(2)]
    nodes.append(ev(9, "10.0.2.1:9880", "g"))
    p = place(nodes)
    assert list(p.unplaced) == [9] and "2 groups" in p.unplaced[9]
    assert len({p.group_of[i] for i in (0, 2, 9)}) == 3
