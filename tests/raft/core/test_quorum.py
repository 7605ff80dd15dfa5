"""raft/core/quorum.py on its own, as etcd-raft tests its quorum package: the commit index a majority
holds, and the outcome of a vote tally, for every configuration size. The configuration changes one server
at a time (raft/core/confchange.py), so there is no joint quorum to test: one majority rule covers all."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from raft.core.quorum import VoteResult, committed_index, majority, vote_result


def test_majority_is_more_than_half() -> None:
    assert [majority(n) for n in range(1, 8)] == [1, 2, 2, 3, 3, 4, 4]


def test_committed_index_is_the_highest_index_a_majority_holds() -> None:
    # etcd's quorum/testdata/majority_commit.txt, on the same shapes.
    assert committed_index(["a"], {"a": 7}) == 7
    assert committed_index(["a", "b"], {"a": 8, "b": 5}) == 5  # two voters: both must hold it
    assert committed_index(["a", "b", "c"], {"a": 8, "b": 5, "c": 2}) == 5
    assert committed_index(["a", "b", "c"], {"a": 8, "b": 8, "c": 2}) == 8
    assert committed_index(["a", "b", "c", "d"], {"a": 9, "b": 8, "c": 5, "d": 1}) == 5  # even: 3 of 4
    assert committed_index(["a", "b", "c", "d", "e"], {"a": 9, "b": 9, "c": 3, "d": 3, "e": 1}) == 3


def test_a_voter_without_a_match_counts_as_zero() -> None:
    assert committed_index(["a", "b", "c"], {"a": 10}) == 0
    assert committed_index(["a", "b", "c"], {"a": 10, "b": 4}) == 4


def test_only_voters_count_towards_the_commit_index() -> None:
    # Learners (and removed servers) have a match index too; they never make an entry committed.
    match = {"a": 10, "b": 1, "c": 1, "learner1": 10, "learner2": 10}
    assert committed_index(["a", "b", "c"], match) == 1


def test_no_voters_commit_nothing() -> None:
    assert committed_index([], {"a": 5}) == 0


def test_committed_index_does_not_depend_on_voter_order() -> None:
    match = {"a": 3, "b": 9, "c": 6}
    assert committed_index(["c", "a", "b"], match) == committed_index(["a", "b", "c"], match) == 6


@given(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=9))
def test_committed_index_matches_the_definition(matches: list[int]) -> None:
    voters = [f"n{i}" for i in range(len(matches))]
    match = dict(zip(voters, matches, strict=True))
    got = committed_index(voters, match)
    need = len(voters) // 2 + 1
    assert sum(1 for m in matches if m >= got) >= need  # a majority holds it
    assert sum(1 for m in matches if m >= got + 1) < need  # and no majority holds anything higher


def test_vote_won_as_soon_as_a_majority_granted() -> None:
    assert vote_result(["a"], {"a": True}) == VoteResult.WON
    assert vote_result(["a", "b", "c"], {"a": True, "b": True}) == VoteResult.WON
    assert vote_result(["a", "b", "c"], {"a": True, "b": True, "c": False}) == VoteResult.WON
    assert vote_result(["a", "b", "c", "d"], {"a": True, "b": True, "c": True}) == VoteResult.WON


def test_vote_pending_while_the_outstanding_votes_could_still_decide() -> None:
    assert vote_result(["a"], {}) == VoteResult.PENDING
    assert vote_result(["a", "b", "c"], {"a": True}) == VoteResult.PENDING
    assert vote_result(["a", "b", "c"], {"a": True, "b": False}) == VoteResult.PENDING
    assert vote_result(["a", "b", "c", "d"], {"a": True, "b": True, "c": False}) == VoteResult.PENDING  # 2 of 4: no


def test_vote_lost_once_a_majority_can_no_longer_grant() -> None:
    assert vote_result(["a"], {"a": False}) == VoteResult.LOST
    assert vote_result(["a", "b", "c"], {"a": False, "b": False}) == VoteResult.LOST
    assert vote_result(["a", "b", "c"], {"a": True, "b": False, "c": False}) == VoteResult.LOST
    # Four voters: two rejections already leave at most two grants, one short of three.
    assert vote_result(["a", "b", "c", "d"], {"a": True, "b": False, "c": False}) == VoteResult.LOST


def test_votes_from_non_voters_are_not_counted() -> None:
    assert vote_result(["a", "b", "c"], {"a": True, "learner": True, "gone": True}) == VoteResult.PENDING
    assert vote_result(["a", "b", "c"], {"learner": False, "gone": False}) == VoteResult.PENDING


def test_vote_result_accepts_a_one_shot_iterable_of_voters() -> None:
    # The core passes whatever collection it holds; a generator is read once for the count and the tally.
    assert vote_result((v for v in ["a", "b", "c"]), {"a": True, "b": True}) == VoteResult.WON


@given(st.lists(st.booleans(), min_size=1, max_size=9), st.randoms(use_true_random=False))
def test_a_decided_vote_stays_decided_as_more_answers_arrive(answers: list[bool], rnd: random.Random) -> None:
    # Answers arrive one by one in any order: the result may move from pending to won or lost, never back
    # and never from one to the other; once every voter answered it is decided.
    voters = [f"n{i}" for i in range(len(answers))]
    order = list(zip(voters, answers, strict=True))
    rnd.shuffle(order)
    votes: dict[str, bool] = {}
    results = [vote_result(voters, votes)]
    for v, granted in order:
        votes[v] = granted
        results.append(vote_result(voters, votes))
    decided = [r for r in results if r != VoteResult.PENDING]
    assert results[-1] != VoteResult.PENDING
    assert decided == [results[-1]] * len(decided)
    assert results.index(results[-1]) + len(decided) == len(results)  # pending first, then decided only
    assert results[-1] == (VoteResult.WON if answers.count(True) >= len(voters) // 2 + 1 else VoteResult.LOST)
