"""Membership changes carry member records (issue 12, bug 5; the context's second slot: issue 17; the context
made opaque: issue 26): what a CONF entry holds, byte by byte (docs/log-format.md), and how a change updates
the records. The core stores each member's raft address and a two-slot context it never reads; the tests
fill the slots with addresses, as the node layer does."""

from __future__ import annotations

import msgpack
import pytest

from raft.core.confchange import ConfChange, ConfChangeOp, apply_change, decode_conf, encode_conf
from raft.core.messages import ConfState

ADD_LEARNER, ADD_VOTER, REMOVE = ConfChangeOp.ADD_LEARNER, ConfChangeOp.ADD_VOTER, ConfChangeOp.REMOVE
BOOT = ConfState(("n1", "n2", "n3"))


def test_an_add_records_the_new_members_addresses_and_a_removal_forgets_them() -> None:
    n4 = ("n4", "10.0.0.4:9880", "10.0.0.4:8770", "10.0.0.4:9770")
    c = apply_change(BOOT, ConfChange(ADD_LEARNER, "n4", n4[1], (n4[2], n4[3])))
    assert c == ConfState(("n1", "n2", "n3"), ("n4",), (n4,))
    c = apply_change(c, ConfChange(ADD_LEARNER, "n5", "10.0.0.5:9880"))  # a second add keeps the first's
    assert c.address("n4") == n4 and c.address("n5") == ("n5", "10.0.0.5:9880", "", "")
    c = apply_change(c, ConfChange(ADD_VOTER, "n4"))  # a promotion without addresses keeps them
    assert c.voters == ("n1", "n2", "n3", "n4") and c.address("n4") == n4
    c = apply_change(c, ConfChange(REMOVE, "n4"))
    assert c.address("n4") is None and [a[0] for a in c.addresses] == ["n5"]


def test_known_addresses_fill_in_members_without_one_and_never_override_the_log() -> None:
    known = (("n1", "h1:1", "h1:2", "h1:3"), ("n4", "stale:1", "", ""), ("n9", "h9:1", "", ""))
    c = apply_change(BOOT, ConfChange(ADD_LEARNER, "n4", "h4:1", ("h4:2", "h4:3"), known))
    # n1 comes from `known`, n4 from the change itself, n9 is no member; n2, n3 stay without.
    assert c.addresses == (("n1", "h1:1", "h1:2", "h1:3"), ("n4", "h4:1", "h4:2", "h4:3"))
    c2 = apply_change(c, ConfChange(ADD_VOTER, "n4", known=(("n1", "other:1", "", "other:3"),)))
    assert c2.address("n1") == ("n1", "h1:1", "h1:2", "h1:3")


def test_known_remoting_addresses_complete_members_a_version_2_log_described() -> None:
    """A member recorded before remoting addresses were carried gains the proposer's configured one, if the
    proposer agrees on its raft address; one recorded with a remoting address keeps it."""
    old = ConfState(("n1", "n2", "n3"), (), (("n1", "h1:1", "h1:2", ""), ("n2", "h2:1", "h2:2", "h2:3")))
    known = (("n1", "h1:1", "h1:2", "h1:3"), ("n2", "h2:1", "h2:2", "other:3"))
    c = apply_change(old, ConfChange(ADD_LEARNER, "n4", "h4:1", known=known))
    assert c.address("n1") == ("n1", "h1:1", "h1:2", "h1:3") and c.address("n2") == ("n2", "h2:1", "h2:2", "h2:3")
    moved = apply_change(old, ConfChange(ADD_LEARNER, "n4", "h4:1", known=(("n1", "elsewhere:1", "", "x:3"),)))
    assert moved.address("n1") == ("n1", "h1:1", "h1:2", "")


def test_conf_entry_bytes_version_1_without_addresses_2_with_and_3_with_remoting_addresses() -> None:
    assert encode_conf(BOOT).hex(" ") == "93 01 93 a2 6e 31 a2 6e 32 a2 6e 33 90"  # [1, voters, learners]
    c = ConfState(("n1",), ("n2",), (("n2", "h:1", "", ""),))
    data = encode_conf(c)  # no remoting address: version 2, the bytes an older node wrote and reads
    assert data.hex(" ") == "94 02 91 a2 6e 31 91 a2 6e 32 91 93 a2 6e 32 a3 68 3a 31 a0"
    assert decode_conf(data) == c and decode_conf(encode_conf(BOOT)) == BOOT
    c = ConfState(("n1",), ("n2",), (("n2", "h:1", "", "r:2"),))
    data = encode_conf(c)  # docs/log-format.md's version 3 example
    assert data.hex(" ") == "94 03 91 a2 6e 31 91 a2 6e 32 91 94 a2 6e 32 a3 68 3a 31 a0 a3 72 3a 32"
    assert decode_conf(data) == c


@pytest.mark.parametrize(
    "doc",
    [
        [3, [], []],
        [1, ["n1"], [], []],  # version 1 has 3 items
        [2, ["n1"], []],  # version 2 has 4
        [4, [], [], []],
        [2, ["n1"], [], [["n1", "h:1"]]],
        [2, ["n1"], [], [["n1", "h:1", "", "r:1"]]],  # version 2 members are triples
        [3, ["n1"], [], [["n1", "h:1", ""]]],  # version 3 members have four strings
        [3, ["n1"], [], [["n1", "h:1", "", 9770]]],
        [3, ["n1"], []],
        [2, ["n1"], [], [["n2", "h:1", ""]]],  # not a member
        [2, ["n1", "n2"], [], [["n2", "h:1", ""], ["n1", "h:1", ""]]],  # not ascending
        [1, "n1", []],
        "x",
    ],
)
def test_damaged_conf_entries_are_refused(doc: object) -> None:
    with pytest.raises(ValueError):
        decode_conf(msgpack.packb(doc))


def test_the_context_is_stored_and_returned_as_it_came() -> None:
    """The core never reads a member's context (issue 26): any two strings go in and come back, through an
    entry of either version."""
    for ctx in (("", ""), ("any", ""), ("", "thing"), ("\x00 opaque", "ünïcode")):
        c = apply_change(BOOT, ConfChange(ADD_LEARNER, "n4", "h4:1", ctx))
        assert c.context("n4") == ctx and decode_conf(encode_conf(c)).context("n4") == ctx
    assert BOOT.context("n1") is None
