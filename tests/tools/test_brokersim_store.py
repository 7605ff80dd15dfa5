"""The simulated broker's disk (tools/brokersim/store.py): RIP-44's consistent point between two epoch files,
truncation, the epoch file and identity file round trips, and malformed files named by file and line."""

from __future__ import annotations

import pytest

from tools.brokersim.store import CommitLog, Identity, consistent_offset, load_identity, save_identity


def log(end: int, *epochs: tuple[int, int]) -> CommitLog:
    return CommitLog(end=end, epochs=list(epochs))


def test_a_slave_with_an_old_masters_unacknowledged_tail_truncates_to_where_the_new_epoch_begins() -> None:
    old_master = log(9216, (1, 0))  # wrote up to 9216 at epoch 1; the others had copied 8192
    new_master = log(10240, (1, 0), (2, 8192))
    assert consistent_offset(old_master, new_master) == 8192
    old_master.truncate(8192)
    assert (old_master.end, old_master.epochs) == (8192, [(1, 0)])
    old_master.copy_from(new_master, new_master.end)
    assert (old_master.end, old_master.epochs) == (10240, [(1, 0), (2, 8192)])
    assert old_master.epoch_at(9000) == 2 and old_master.epoch_at(100) == 1 and old_master.epoch_at(10240) is None


def test_a_behind_slave_keeps_its_log_and_the_consistent_point_is_its_own_end() -> None:
    slave = log(4096, (1, 0))
    master = log(10240, (1, 0), (3, 8192))
    assert consistent_offset(slave, master) == 4096


def test_no_common_epoch_truncates_everything() -> None:
    assert consistent_offset(log(100, (5, 0)), log(300, (6, 0))) == 0
    assert consistent_offset(log(0), log(300, (6, 0))) == 0


def test_the_same_epoch_started_elsewhere_is_not_consistent_and_an_older_common_entry_is_used() -> None:
    slave = log(500, (1, 0), (2, 300))
    master = log(600, (1, 0), (2, 200))  # epoch 2 began at 200 there: the slave's epoch-2 bytes are not the master's
    assert consistent_offset(slave, master) == 200


def test_a_new_master_whose_previous_epoch_wrote_nothing_replaces_that_entry() -> None:
    log_ = log(100, (1, 0))
    log_.begin_epoch(2)
    log_.begin_epoch(3)
    assert log_.epochs == [(1, 0), (3, 100)]


def test_the_epoch_file_and_identity_survive_a_restart(tmp_path) -> None:
    path = str(tmp_path / "epochs")
    saved = CommitLog(path=path)
    saved.begin_epoch(1)
    saved.append(1024)
    saved.begin_epoch(4)
    saved.append(10)
    saved.save()
    loaded = CommitLog.load(path)
    assert (loaded.end, loaded.epochs) == (1034, [(1, 0), (4, 1024)])
    assert (tmp_path / "epochs").read_text() == "1 0\n4 1024\nend 1034\n"
    ident = str(tmp_path / "identity")
    assert load_identity(ident) is None
    save_identity(ident, Identity(3, "127.0.0.1:10911;1700000000000", False))
    assert load_identity(ident) == Identity(3, "127.0.0.1:10911;1700000000000", False)


def test_malformed_files_are_named_with_their_line(tmp_path) -> None:
    (tmp_path / "epochs").write_text("1 0\nx y\n")
    with pytest.raises(ValueError, match=r"epochs:2: expected '<epoch> <startOffset>'"):
        CommitLog.load(str(tmp_path / "epochs"))
    (tmp_path / "identity").write_text("brokerId=1\nnonsense\n")
    with pytest.raises(ValueError, match=r"identity:2: expected brokerId="):
        load_identity(str(tmp_path / "identity"))
