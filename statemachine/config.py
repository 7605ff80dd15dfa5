"""The replicated part of the controller config: keys that change what applying a command decides.

RocketMQ keeps `updateControllerConfig` node-local, so jRaft replicas with different
`enableElectUncleanMaster` can elect different masters from one log entry (spec §12). Here these keys
change only through a 1009 command, so every replica decides with the same values. Every replica starts
from RocketMQ's defaults; the daemon proposes the values of its properties file (for example for keys the
log has never set, see `explicit`). Node-local keys (scan interval, paths, ports, ...) never enter the log.
"""

from __future__ import annotations

from collections.abc import Mapping

from statemachine import _body as B
from statemachine.commands import CONFIG_KEYS, config_value_ok
from statemachine.sections import SECTION_CONTROLLER_CONFIG
from statemachine.values import JSONObject

ConfigValue = int | bool  # a replicated key's value (CONFIG_KEYS says which)

# The one declaration of the replicated keys' defaults: cli/config.py's settings table reads them from here
# (replicated_key), since statemachine/ may not import cli/; tests/cli/test_settings_once.py holds it so.
DEFAULTS: dict[str, ConfigValue] = {
    "enableElectUncleanMaster": False,
    "electMasterMaxRetryCount": 3,
    "notifyBrokerRoleChanged": True,
}


class ReplicatedConfig:
    """A SnapshotAbleMetadataManager. The section stores only the keys set through the log."""

    def __init__(self) -> None:
        self.explicit: dict[str, ConfigValue] = {}
        self._refresh()

    def _refresh(self) -> None:
        # Plain attributes: read on every election, so no dict lookups there.
        values = {**DEFAULTS, **self.explicit}
        self.enable_elect_unclean_master = bool(values["enableElectUncleanMaster"])
        self.elect_master_max_retry_count = int(values["electMasterMaxRetryCount"])
        self.notify_broker_role_changed = bool(values["notifyBrokerRoleChanged"])

    def values(self) -> dict[str, ConfigValue]:
        """Every replicated key with its current value (defaults included), sorted by key."""
        merged = {**DEFAULTS, **self.explicit}
        return {k: merged[k] for k in sorted(merged)}

    def update(self, changes: Mapping[str, ConfigValue]) -> None:
        """Apply a checked 1009 body (commands.parse vouches for keys and types)."""
        self.explicit.update(changes)
        self._refresh()

    def section_type(self) -> int:
        return SECTION_CONTROLLER_CONFIG

    def encode_snapshot(self) -> bytes:
        return B.pack([[k, self.explicit[k]] for k in sorted(self.explicit)])

    def load_snapshot(self, body: bytes) -> None:
        (rows,) = B.unpack(SECTION_CONTROLLER_CONFIG, body, 1)
        explicit: dict[str, ConfigValue] = {}
        for key, value in B.rows(rows, 2, "controllerConfig"):
            B.check(B.is_str(key) and key in CONFIG_KEYS, "controllerConfig: unknown key {!r}", key)
            B.check(config_value_ok(key, value), "controllerConfig {}: bad value {!r}", key, value)
            explicit[key] = value
        B.ascending([r[0] for r in rows], "controllerConfig keys")
        self.explicit = explicit
        self._refresh()

    def to_json(self) -> JSONObject:
        return {"explicit": {k: self.explicit[k] for k in sorted(self.explicit)}, "effective": self.values()}
