"""KvConfigManager (put/get/delete/compare-and-set) and the replicated controller config (1009)."""

from __future__ import annotations

import msgpack
import pytest

from statemachine import CONFIG_DEFAULTS, ControllerStateMachine, Result
from statemachine import codes as C
from statemachine import commands as cmd

from .harness import remark

T = 1_000


def run(sm: ControllerStateMachine, data: bytes) -> Result:
    return sm.apply(data)


def test_put_get_delete() -> None:
    sm = ControllerStateMachine()
    r = run(sm, cmd.kv_get(T, "ns", "k"))
    assert (r.code, r.code_name, r.remark) == (
        C.QUERY_NOT_FOUND,
        "QUERY_NOT_FOUND",
        "No config item, Namespace: ns Key: k",
    )
    assert run(sm, cmd.kv_put(T, "ns", "k", "v1")).to_envelope() == {
        "code": 0,
        "codeName": "SUCCESS",
        "remark": None,
        "header": None,
        "body": {"value": "v1"},
    }
    assert run(sm, cmd.kv_get(T, "ns", "k")).body == {"value": "v1"}
    assert run(sm, cmd.kv_get(T, "other", "k")).code == C.QUERY_NOT_FOUND  # namespaces are separate
    assert run(sm, cmd.kv_put(T, "ns", "k", "")).ok and run(sm, cmd.kv_get(T, "ns", "k")).body == {"value": ""}
    assert run(sm, cmd.kv_delete(T, "ns", "k")).body == {"deleted": True}
    assert run(sm, cmd.kv_delete(T, "ns", "k")).body == {"deleted": False}
    assert sm.kv.table == {}  # an emptied namespace goes, so equal content gives equal snapshot bytes


def test_compare_and_set() -> None:
    sm = ControllerStateMachine()
    assert run(sm, cmd.kv_cas(T, "ns", "k", "x", "v")).body == {"succeeded": False, "value": None}
    assert run(sm, cmd.kv_cas(T, "ns", "k", None, "v1")).body == {"succeeded": True, "value": "v1"}
    assert run(sm, cmd.kv_cas(T, "ns", "k", None, "v2")).body == {"succeeded": False, "value": "v1"}
    assert run(sm, cmd.kv_cas(T, "ns", "k", "v0", "v2")).body == {"succeeded": False, "value": "v1"}
    assert run(sm, cmd.kv_cas(T, "ns", "k", "v1", "v2")).body == {"succeeded": True, "value": "v2"}
    assert run(sm, cmd.kv_get(T, "ns", "k")).body == {"value": "v2"}


def test_config_defaults_and_update() -> None:
    sm = ControllerStateMachine()
    assert (
        sm.config_values()
        == CONFIG_DEFAULTS
        == {"electMasterMaxRetryCount": 3, "enableElectUncleanMaster": False, "notifyBrokerRoleChanged": True}
    )
    r = run(sm, cmd.update_controller_config(T, {"enableElectUncleanMaster": True, "electMasterMaxRetryCount": 5}))
    assert r.ok and r.remark is None
    assert sm.config_values()["enableElectUncleanMaster"] is True and sm.config.elect_master_max_retry_count == 5
    assert sm.config.explicit == {"enableElectUncleanMaster": True, "electMasterMaxRetryCount": 5}


@pytest.mark.parametrize(
    "config",
    [
        {"scanNotActiveBrokerInterval": 1},
        {"enableElectUncleanMaster": 1},
        {"electMasterMaxRetryCount": True},
        {"electMasterMaxRetryCount": -1},
        {"notifyBrokerRoleChanged": "true"},
    ],
)
def test_bad_config_never_reaches_the_state(config: dict) -> None:
    with pytest.raises((TypeError, ValueError)):
        cmd.update_controller_config(T, config)
    # forged bytes (what a buggy proposer could write) are refused on apply as well
    sm = ControllerStateMachine()
    before = sm.encode_sections()
    r = sm.apply(msgpack.packb([cmd.FORMAT_VERSION, C.UPDATE_CONTROLLER_CONFIG, T, config]))
    assert r.code == C.CONTROLLER_JRAFT_INTERNAL_ERROR and "'config'" in remark(r)
    assert sm.encode_sections() == before
