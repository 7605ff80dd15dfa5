"""The controller-invariant checker: single master per epoch, monotonic epochs per client, acknowledged
SyncStateSet changes survive."""

from __future__ import annotations

from typing import Any

import pytest

from jepsen.history import HistoryError
from jepsen.workloads.controller import check_controller
from tests.jepsen import HOp, history


def state(master: int | None, epoch: int | None, sss_epoch: int | None = None, sss: list[int] | None = None) -> dict:
    return {"masterBrokerId": master, "masterEpoch": epoch, "syncStateSetEpoch": sss_epoch, "syncStateSet": sss}


def elect(p: int, start: int, end: int, result: dict | None, type: str = "ok", broker: str = "b1") -> HOp:
    return HOp(p, "elect-master", {"brokerId": 1}, start, end, type, result, broker)


def info(p: int, start: int, end: int, result: dict, broker: str = "b1") -> HOp:
    return HOp(p, "replica-info", None, start, end, "ok", result, broker)


def alter(
    p: int, start: int, end: int, master: int, epoch: int, new: list[int], new_epoch: int, type: str = "ok"
) -> HOp:
    request = {"masterBrokerId": master, "masterEpoch": epoch, "syncStateSet": new, "syncStateSetEpoch": new_epoch - 1}
    result = {"syncStateSetEpoch": new_epoch, "syncStateSet": new} if type == "ok" else None
    return HOp(p, "alter-sync-state-set", request, start, end, type, result, "b1")


def final(p: int, start: int, end: int, **brokers: dict) -> HOp:
    return HOp(p, "sync-state-data", {"brokerNames": list(brokers)}, start, end, "ok", brokers, None)


def check(*ops: HOp) -> dict[str, Any]:
    return check_controller(history(*ops).ops)


HAPPY = [
    elect(1, 0, 10, state(1, 1, 1, [1])),
    info(2, 20, 30, state(1, 1, 1, [1])),
    alter(1, 40, 50, 1, 1, [1, 2], 2),
    info(2, 60, 70, state(1, 1, 2, [1, 2])),
    elect(3, 80, 90, state(1, 1, 2, [1, 2])),  # 2011: the master is kept; still an observation
]


def test_a_clean_run_is_valid() -> None:
    res = check(*HAPPY, final(9, 100, 110, b1=state(1, 1, 2, [2, 1])))
    assert res["verdict"] == "valid"
    c = res["counts"]
    assert (c["observations"], c["broker_sets"], c["masters_observed"], c["acknowledged_alters"]) == (6, 1, 1, 1)


def test_two_masters_with_the_same_epoch() -> None:
    res = check(elect(1, 0, 10, state(1, 2)), info(2, 20, 30, state(2, 2)))
    assert res["verdict"] == "invalid"
    (v,) = res["single_master"]
    assert (v["brokerName"], v["masterEpoch"], v["masters"]) == ("b1", 2, [1, 2])
    assert [o["lines"] for o in v["ops"]] == [[1, 2], [3, 4]]


def test_an_accepted_alter_names_its_master() -> None:
    # the controller accepted broker 2 as master at epoch 1, while broker 1 was elected at epoch 1
    res = check(elect(1, 0, 10, state(1, 1, 1, [1])), alter(2, 20, 30, 2, 1, [2], 2))
    assert res["counts"]["single_master_violations"] == 1


def test_different_epochs_and_other_broker_sets_are_independent() -> None:
    ops = [elect(1, 0, 10, state(1, 1)), info(2, 20, 30, state(2, 2)), elect(3, 0, 10, state(2, 1), broker="b2")]
    assert check(*ops)["verdict"] == "valid"


@pytest.mark.parametrize("field", ["masterEpoch", "syncStateSetEpoch"])
def test_epochs_never_go_backwards_in_one_clients_view(field: str) -> None:
    newer, older = state(1, 3, 3, [1]), state(1, 3, 3, [1])
    older[field] = 2
    res = check(info(1, 0, 10, newer), info(1, 20, 30, older))
    assert res["verdict"] == "invalid"
    (v,) = res["monotonic_epochs"]
    assert (v["process"], v["brokerName"], v["field"], v["from"], v["to"]) == (1, "b1", field, 3, 2)


def test_different_clients_may_see_different_epochs() -> None:
    assert check(info(1, 0, 10, state(1, 3, 3, [1])), info(2, 20, 30, state(1, 2, 2, [1])))["verdict"] == "valid"


def test_failed_and_indeterminate_ops_are_not_observations() -> None:
    ops = [elect(1, 0, 10, state(1, 2)), elect(2, 20, 30, state(2, 2), "fail"), elect(3, 20, 30, state(2, 2), "info")]
    res = check(*ops)
    assert (res["verdict"], res["counts"]["observations"]) == ("valid", 1)


def test_acknowledged_alter_lost() -> None:
    res = check(*HAPPY, final(9, 100, 110, b1=state(1, 1, 1, [1])))
    assert res["verdict"] == "invalid"
    (v,) = res["acknowledged_alters"]
    assert (v["syncStateSetEpoch"], v["syncStateSet"], v["reason"]) == (
        2,
        [1, 2],
        "the final syncStateSetEpoch is older",
    )


def test_acknowledged_alter_superseded_by_a_later_epoch() -> None:
    assert check(*HAPPY, final(9, 100, 110, b1=state(2, 2, 3, [2])))["verdict"] == "valid"


def test_acknowledged_alter_replaced_under_the_same_epoch() -> None:
    res = check(*HAPPY, final(9, 100, 110, b1=state(1, 1, 2, [1, 3])))
    assert res["acknowledged_alters"][0]["reason"] == "the final state has another set under the same epoch"


def test_broker_set_missing_from_the_final_state() -> None:
    res = check(*HAPPY, final(9, 100, 110, b2=state(1, 1, 1, [1])))
    assert res["acknowledged_alters"][0]["reason"] == "the broker-set is missing from the final state"


def test_alters_without_a_final_read_after_them_are_unknown() -> None:
    assert check(*HAPPY)["verdict"] == "unknown"
    res = check(*HAPPY[:2], final(9, 35, 45, b1=state(1, 1, 1, [1])), *HAPPY[2:])
    assert res["verdict"] == "unknown" and res["counts"]["unjudged_alters"] == 1


def test_an_unacknowledged_alter_need_not_survive() -> None:
    ops = [*HAPPY[:2], alter(1, 40, 50, 1, 1, [1, 2], 2, "info"), final(9, 100, 110, b1=state(1, 1, 1, [1]))]
    assert check(*ops)["verdict"] == "valid"


@pytest.mark.parametrize(
    ("op", "words"),
    [
        (info(1, 0, 10, {"masterEpoch": "2"}), "masterEpoch of broker-set 'b1' must be an integer"),
        (info(1, 0, 10, {"syncStateSet": [1, "2"]}), "syncStateSet of broker-set 'b1' must be a list"),
        (HOp(1, "alter-sync-state-set", {}, 0, 10, "ok", {"syncStateSet": [1]}, "b1"), "carries syncStateSetEpoch"),
        (HOp(1, "sync-state-data", None, 0, 10, "ok", {"b1": 3}, None), "state of broker-set 'b1' must be an object"),
    ],
)
def test_malformed_responses_name_the_line(op: HOp, words: str) -> None:
    with pytest.raises(HistoryError, match=words) as e:
        check(op)
    assert (e.value.line, e.value.field) == (2, "value")
