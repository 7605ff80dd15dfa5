"""RocketMQ's controller config requests (1009 UPDATE_CONTROLLER_CONFIG, 1010 GET_CONTROLLER_CONFIG) as both
front ends serve them: what 1010 shows and which 1009 changes are accepted. The requests themselves, typed,
and their commands are api/service/requests.py's."""

from __future__ import annotations

import re
from collections.abc import Mapping

from api.service.controller import ControllerService
from api.service.errors import invalid, shown, validation_error
from api.service.settings import ApiSettings
from statemachine import codes as C
from statemachine import commands
from statemachine.config import ConfigValue
from statemachine.result import Result

# ------------------------------------------------------------------------------- controller config (1009/1010)

JAVA_INT_MAX = 2**31 - 1
_INT = re.compile(r"[+-]?[0-9]+")
BLACK_LISTED = Result(C.NO_PERMISSION, "Can not update config in black list.")  # RocketMQ's answer


def _text(v: object) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def config_view(service: ControllerService, settings: ApiSettings) -> dict[str, str]:
    """1010: the node-local effective keys, and the replicated keys as the state machine applies them
    (this node's applied state, like RocketMQ's node-local 1010)."""
    out = dict(settings.local_config)
    out.update({k: _text(v) for k, v in service.replicated_config().items()})
    return dict(sorted(out.items()))


def parse_config_value(kind: int, raw: object) -> ConfigValue | None:
    """A replicated key's value from properties text or the JSON value of its type; None if neither."""
    if kind == commands.BOOL:
        if type(raw) is bool:
            return raw
        if type(raw) is str and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
    elif kind == commands.INT:
        if type(raw) is int:
            return raw
        if type(raw) is str and _INT.fullmatch(raw.strip()):
            return int(raw.strip())
    return None


def plan_config_update(body: Mapping[str, object], settings: ApiSettings) -> dict[str, ConfigValue] | Result:
    """The 1009 changes of a config update, or RocketMQ's 16 answer for a black-listed key. Raises ApiError
    (a 422 over HTTP) naming every key that is unknown, node-local (not changeable at runtime) or has a bad value."""
    if any(k in settings.black_list() for k in body):
        return BLACK_LISTED
    if not body:
        raise invalid("body", "no config key given", type="missing")
    runtime = ", ".join(sorted(commands.CONFIG_KEYS))
    changes: dict[str, ConfigValue] = {}
    errors: list[dict[str, str]] = []
    for key, raw in body.items():
        kind = commands.CONFIG_KEYS.get(key)
        if kind is None:
            if key in settings.local_config:
                why = f"a node-local key: set it in the node's properties file and restart (only {runtime} change at runtime, through the Raft log)"
            else:
                why = f"not a controller config key that can change at runtime (those are {runtime})"
            errors.append({"field": key, "location": "body", "message": why, "type": "config_key"})
            continue
        value = parse_config_value(kind, raw)
        out_of_range = kind == commands.INT and value is not None and not 0 <= value <= JAVA_INT_MAX
        if value is None or out_of_range or not commands.config_value_ok(key, value):
            want = '"true" or "false"' if kind == commands.BOOL else f"an integer from 0 to {JAVA_INT_MAX}"
            errors.append(
                {
                    "field": key,
                    "location": "body",
                    "message": f"must be {want}, got {shown(raw)}",
                    "type": "config_value",
                }
            )
            continue
        changes[key] = value
    if errors:
        raise validation_error(errors)
    return changes
