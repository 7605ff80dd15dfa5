"""raft/core/progress.py on its own, as etcd-raft tests its tracker package: the probe, replicate and
snapshot states and the moves between them, when a follower is paused, the in-flight window, and how
acknowledgements and rejections move match and next (stale answers must move nothing)."""

from __future__ import annotations

from raft.core.progress import Progress, ProgressState


def replicating(match: int, next_index: int, max_inflight: int = 4) -> Progress:
    pr = Progress(next_index, max_inflight)
    pr.match = match
    pr.become_replicate()
    pr.next = next_index
    return pr


def test_a_new_progress_probes_from_the_given_next() -> None:
    pr = Progress(11, max_inflight=4)
    assert (pr.state, pr.match, pr.next) == (ProgressState.PROBE, 0, 11)
    assert not pr.is_paused() and not pr.inflights


# --- pausing -----------------------------------------------------------------------------------------------


def test_probe_sends_one_append_and_waits_for_its_answer() -> None:
    pr = Progress(5, max_inflight=4)
    pr.sent(7)
    assert pr.is_paused()
    assert pr.next == 5  # a probe does not advance next: where the logs match is not known yet
    assert not pr.inflights
    pr.maybe_update(4)  # the answer (even one that does not move match past 4) unpauses it
    assert not pr.is_paused()


def test_probe_unpaused_by_a_fresh_rejection() -> None:
    pr = Progress(5, max_inflight=4)
    pr.sent(4)
    assert pr.maybe_decrease(4, next_guess=2)
    assert not pr.is_paused() and pr.next == 3


def test_replicate_pauses_when_the_inflight_window_is_full() -> None:
    pr = replicating(match=10, next_index=11, max_inflight=3)
    for last in (12, 14, 15):
        assert not pr.is_paused()
        pr.sent(last)
    assert list(pr.inflights) == [12, 14, 15] and pr.next == 16
    assert pr.is_paused()


def test_snapshot_state_is_always_paused() -> None:
    pr = Progress(5, max_inflight=4)
    pr.become_snapshot(100)
    assert pr.is_paused()
    pr.maybe_update(50)  # an answer short of the snapshot keeps it waiting
    assert pr.is_paused() and pr.state is ProgressState.SNAPSHOT


# --- the in-flight window -------------------------------------------------------------------------------


def test_an_ack_frees_every_append_it_covers() -> None:
    pr = replicating(match=0, next_index=1, max_inflight=4)
    for last in (3, 6, 9, 12):
        pr.sent(last)
    assert pr.is_paused()
    pr.maybe_update(7)  # covers the appends ending at 3 and 6, not the one ending at 9
    assert list(pr.inflights) == [9, 12] and not pr.is_paused()
    pr.maybe_update(12)
    assert not pr.inflights


def test_an_empty_append_in_replicate_takes_no_window_slot() -> None:
    pr = replicating(match=10, next_index=11, max_inflight=2)
    pr.sent(10)  # a heartbeat-like append carrying only the commit index: last index = next - 1
    assert not pr.inflights and pr.next == 11 and not pr.is_paused()


def test_an_ack_past_next_moves_next() -> None:
    pr = replicating(match=5, next_index=6)
    assert pr.maybe_update(20)
    assert (pr.match, pr.next) == (20, 21)


def test_a_stale_ack_changes_nothing() -> None:
    pr = replicating(match=10, next_index=11)
    pr.sent(15)
    assert not pr.maybe_update(8)
    assert (pr.match, pr.next, list(pr.inflights)) == (10, 16, [15])


def test_a_duplicate_ack_reports_no_progress() -> None:
    pr = replicating(match=10, next_index=11)
    assert pr.maybe_update(12)
    assert not pr.maybe_update(12)
    assert pr.match == 12


# --- state transitions (etcd's TestProgressBecomeProbe / BecomeReplicate / BecomeSnapshot) ----------------


def test_replicate_to_probe_restarts_after_match() -> None:
    pr = replicating(match=1, next_index=5)
    pr.sent(6)
    pr.become_probe()
    assert (pr.state, pr.next, pr.match) == (ProgressState.PROBE, 2, 1)
    assert not pr.inflights and not pr.is_paused()


def test_snapshot_to_probe_continues_after_the_snapshot() -> None:
    pr = Progress(5, max_inflight=4)
    pr.match = 1
    pr.become_snapshot(10)
    pr.become_probe()
    assert (pr.state, pr.next, pr.pending_snapshot) == (ProgressState.PROBE, 11, 0)
    # A follower that got further than the snapshot (it acknowledged more) continues from its match.
    pr = Progress(5, max_inflight=4)
    pr.become_snapshot(10)
    pr.match = 12
    pr.become_probe()
    assert pr.next == 13


def test_probe_to_replicate_starts_after_match_with_an_empty_window() -> None:
    pr = Progress(5, max_inflight=4)
    pr.sent(4)
    pr.maybe_update(4)
    pr.become_replicate()
    assert (pr.state, pr.next, pr.match) == (ProgressState.REPLICATE, 5, 4)
    assert not pr.inflights and not pr.probe_sent and not pr.is_paused()


def test_become_snapshot_records_the_snapshot_and_drops_the_window() -> None:
    pr = replicating(match=1, next_index=2)
    pr.sent(5)
    pr.become_snapshot(10)
    assert (pr.state, pr.pending_snapshot, pr.match) == (ProgressState.SNAPSHOT, 10, 1)
    assert not pr.inflights


# --- rejections (etcd's TestProgressMaybeDecr) ---------------------------------------------------------


def test_replicate_rejection_at_or_below_match_is_stale() -> None:
    pr = replicating(match=5, next_index=10)
    assert not pr.maybe_decrease(5, next_guess=5)
    assert not pr.maybe_decrease(4, next_guess=4)
    assert pr.next == 10


def test_replicate_rejection_above_match_rewinds_next_to_match() -> None:
    pr = replicating(match=5, next_index=10)
    assert pr.maybe_decrease(9, next_guess=9)
    assert pr.next == 6


def test_probe_rejection_not_of_the_last_probe_is_stale() -> None:
    pr = Progress(10, max_inflight=4)  # the probe in flight has previous index 9
    assert not pr.maybe_decrease(5, next_guess=5)
    assert pr.next == 10


def test_probe_rejection_moves_next_back_to_the_hint() -> None:
    pr = Progress(10, max_inflight=4)
    assert pr.maybe_decrease(9, next_guess=4)  # the follower's log ends at 4
    assert pr.next == 5
    pr = Progress(10, max_inflight=4)
    assert pr.maybe_decrease(9, next_guess=20)  # a hint past the rejected index: one back, no further on
    assert pr.next == 9


def test_probe_rejection_never_moves_next_to_or_below_match_or_zero() -> None:
    pr = Progress(10, max_inflight=4)
    pr.match = 6
    assert pr.maybe_decrease(9, next_guess=2)
    assert pr.next == 7
    pr = Progress(1, max_inflight=4)
    assert pr.maybe_decrease(0, next_guess=-1)
    assert pr.next == 1


# --- a follower that lost its log ------------------------------------------------------------------------


def test_lost_entries_forgets_match_and_probes_from_the_followers_end() -> None:
    pr = replicating(match=50, next_index=60)
    pr.sent(70)
    pr.lost_entries(3)
    assert (pr.state, pr.match, pr.next) == (ProgressState.PROBE, 0, 4)
    assert not pr.inflights and not pr.is_paused()
