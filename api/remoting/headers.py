"""The custom headers of the controller's requests and responses, as RocketMQ's header classes declare them
(remoting/protocol/header/controller/**, header/namesrv/BrokerHeartbeatRequestHeader): field name, Java type
and whether it is @CFNotNull. On the wire every field is text in `extFields`; `parse` converts it the way
RemotingCommand.decodeCommandCustomHeader does (Long.parseLong, Integer.parseInt, Boolean.parseBoolean) and
names the field it refuses; `to_ext` renders a response header the way makeCustomHeaderToNet does (null
fields left out)."""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from typing import Annotated

import msgspec

from api.service.errors import shown
from api.service.requests import (
    BOOLEAN,
    INTEGER,
    LONG,
    REQUESTS,
    STRING,
    BrokerHeartbeat,
    HeaderValue,
    Schema,
    command_names,
    defaults,
    schema,
)
from statemachine import codes as C
from statemachine.commands import HEARTBEAT_DEFAULTS, HEARTBEAT_NAMES

_RANGES = {LONG: (-(2**63), 2**63 - 1), INTEGER: (-(2**31), 2**31 - 1)}
_DECIMAL = re.compile(r"[+-]?[0-9]+")


BROKER_HEARTBEAT = BrokerHeartbeat.CODE  # RequestCode.BROKER_HEARTBEAT (a broker's; proposed as 1018)
GET_METADATA_INFO = 1005
GET_CONTROLLER_CONFIG = 1010

# Request headers by request code, derived from the typed requests (api/service/requests.py: each field's Java
# type and whether it is required). 1005, 1006, 1009 and 1010 carry none (1006 and 1009 have a body).
REQUEST: dict[int, Schema] = {r.CODE: schema(r) for r in REQUESTS if schema(r)}

# Fields required here that the Java class leaves without @CFNotNull: RocketMQ's controller takes them null and
# fails inside its state machine (a null map key, an NPE); here the request is refused naming the field. A Java
# broker always sends them.
STRICTER: dict[int, tuple[str, ...]] = {
    C.GET_NEXT_BROKER_ID: ("clusterName", "brokerName"),
    C.APPLY_BROKER_ID: ("clusterName", "brokerName", "appliedBrokerId", "registerCheckCode"),
}

# Initial values of nullable Java fields a request may leave out (a @CFNotNull field must be on the wire even
# when its Java field has an initializer: Java's client always sends it, and decodeCommandCustomHeader refuses
# it missing).
DEFAULTS: dict[int, dict[str, HeaderValue]] = {r.CODE: defaults(r) for r in REQUESTS if defaults(r)}

# Response headers by request code (what a client decodes; 2007's fields are in NOT_LEADER).
RESPONSE: dict[int, Schema] = {
    C.ALTER_SYNC_STATE_SET: (("newSyncStateSetEpoch", INTEGER, False),),
    C.ELECT_MASTER: (
        ("masterBrokerId", LONG, False),
        ("masterAddress", STRING, False),
        ("masterEpoch", INTEGER, False),
        ("syncStateSetEpoch", INTEGER, False),
    ),
    C.REGISTER_BROKER: (
        ("clusterName", STRING, False),
        ("brokerName", STRING, False),
        ("masterBrokerId", LONG, False),
        ("masterAddress", STRING, False),
        ("masterEpoch", INTEGER, False),
        ("syncStateSetEpoch", INTEGER, False),
    ),
    C.GET_REPLICA_INFO: (
        ("masterBrokerId", LONG, False),
        ("masterAddress", STRING, False),
        ("masterEpoch", INTEGER, False),
    ),
    GET_METADATA_INFO: (
        ("group", STRING, False),
        ("controllerLeaderId", STRING, False),
        ("controllerLeaderAddress", STRING, False),
        ("isLeader", BOOLEAN, False),
        ("peers", STRING, False),
    ),
    C.GET_NEXT_BROKER_ID: (
        ("clusterName", STRING, False),
        ("brokerName", STRING, False),
        ("nextBrokerId", LONG, False),
    ),
    C.APPLY_BROKER_ID: (("clusterName", STRING, False), ("brokerName", STRING, False)),
}
NOT_LEADER: Schema = (("controllerLeaderId", STRING, False), ("controllerLeaderAddress", STRING, False))

# Response fields whose Java type is primitive (`int`): never null in Java, so makeCustomHeaderToNet always sends
# them, the zero value where the controller set nothing. AlterSyncStateSetResponseHeader.newSyncStateSetEpoch is
# an `int`: RocketMQ answers every refused 1001 (2000-2003, 2006, 2013) with newSyncStateSetEpoch "0"
# (tests/interop/test_differential.py). GetMetaDataResponseHeader.isLeader is a `boolean`, always set here.
PRIMITIVE_ZERO: dict[int, dict[str, HeaderValue]] = {C.ALTER_SYNC_STATE_SET: {"newSyncStateSetEpoch": 0}}


class HeaderFieldError(ValueError):
    """A header field is missing or not of its Java type; the message names it (RocketMQ's remark text)."""


def _convert(name: str, kind: str, text: str) -> HeaderValue:
    if kind == STRING:
        return text
    if kind == BOOLEAN:
        return text.lower() == "true"  # Boolean.parseBoolean: anything else is false
    t = text.strip() if kind == LONG else text
    if not _DECIMAL.fullmatch(t):
        raise HeaderFieldError(f"the custom field <{name}> is not a {kind}: {shown(text)}")
    v = int(t)
    lo, hi = _RANGES[kind]
    if not lo <= v <= hi:
        raise HeaderFieldError(f"the custom field <{name}> is outside the {kind} range: {shown(text)}")
    return v


def parse(
    schema: Schema, ext: Mapping[str, str], defaults: Mapping[str, HeaderValue] | None = None
) -> dict[str, HeaderValue]:
    """The typed fields of a header (None where absent and nullable)."""
    out: dict[str, HeaderValue] = dict(defaults or {})
    for name, kind, required in schema:
        text = ext.get(name)
        if text is None:
            if required:
                raise HeaderFieldError(f"the custom field <{name}> is null")
            out.setdefault(name, None)
            continue
        out[name] = _convert(name, kind, text)
    return out


# A broker's heartbeat straight from its extFields into the 1202 item (statemachine.commands.heartbeat_item), on the
# leader's hottest path, in a few C calls instead of a Python loop over the fields (that loop was 5.9 us a heartbeat,
# 12 % of a leader's busy time at 30,000 brokers: docs/performance.md). Per item position: the header field and the
# text it takes when left out (None: required; brokerId left out is the generic path's to refuse). The item's
# Strings come first, its numbers after them; the numbers are read as one JSON array, each checked against its
# Java type's range.
_COMMAND_FIELD = {command: name for name, command in command_names(BrokerHeartbeat)}
_HEARTBEAT_KINDS = {name: kind for name, kind, _ in schema(BrokerHeartbeat)}
_ITEM_FIELDS = tuple(
    (_COMMAND_FIELD[c], None if c not in HEARTBEAT_DEFAULTS else str(HEARTBEAT_DEFAULTS[c])) for c in HEARTBEAT_NAMES
)
_ITEM_KINDS = [_HEARTBEAT_KINDS[name] for name, _ in _ITEM_FIELDS]
_FIRST_NUMBER = _ITEM_KINDS.index(next(k for k in _ITEM_KINDS if k != STRING))
assert {*_ITEM_KINDS[:_FIRST_NUMBER]} == {STRING} and {*_ITEM_KINDS[_FIRST_NUMBER:]} <= _RANGES.keys(), _ITEM_KINDS
_ITEM_NUMBERS = msgspec.json.Decoder(
    types.GenericAlias(
        tuple,
        tuple(Annotated[int, msgspec.Meta(ge=_RANGES[k][0], le=_RANGES[k][1])] for k in _ITEM_KINDS[_FIRST_NUMBER:]),
    )
)


def heartbeat_item(ext: Mapping[str, str]) -> list[str | int] | None:
    """The 904's 1202 item from its extFields when every field is plain: each String present, each number an
    optional minus and decimal digits without leading zeros in its Java type's range, an optional number left
    out taking its default. That is what a Java broker sends (Long.toString, Integer.toString), and the item is
    then exactly what `parse`, the typed request and `commands.heartbeat_item` make of it, with no dict of typed
    fields and no request object in between (tests/api/test_heartbeat_fast_path.py). None for anything else (a
    missing field, brokerId left out, a sign, a space, a leading zero, a number out of range, a field that is no
    text): the generic path then answers it, its errors included."""
    texts: list = [ext.get(name, default) for name, default in _ITEM_FIELDS]
    try:
        numbers = ",".join(texts[_FIRST_NUMBER:])
        "".join(texts[:_FIRST_NUMBER])  # each String a str
    except TypeError:  # a required field left out, or a value that is no str
        return None
    # JSON would take a space, a tab or a line break around a number; Integer.parseInt takes none
    if " " in numbers or not numbers.isprintable():
        return None
    try:
        texts[_FIRST_NUMBER:] = _ITEM_NUMBERS.decode(f"[{numbers}]")
    except msgspec.DecodeError:  # not a number, a leading zero, out of range, or one field holding several
        return None
    return texts


_IDENTITY = tuple(HEARTBEAT_NAMES.index(n) for n in ("clusterName", "brokerName", "brokerId"))


def identity(item: list[str | int]) -> tuple[str, str, int]:
    """The broker a checked 1202 item is from: (clusterName, brokerName, brokerId)."""
    c, n, i = _IDENTITY
    return item[c], item[n], item[i]  # type: ignore[return-value]  # a checked item's kinds


def to_ext(header: Mapping[str, object] | None, code: int | None = None) -> dict[str, str]:
    """A response header as extFields: Java's toString of each non-null field. With the request `code`, a null
    field of a primitive Java type (PRIMITIVE_ZERO) is sent as its zero value, as Java does."""
    if not header:
        return {}
    zeros = PRIMITIVE_ZERO.get(code, {}) if code is not None else {}
    out = {}
    for k, v in header.items():
        if v is None:
            v = zeros.get(k)
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def typed(schema: Schema, ext: Mapping[str, str]) -> dict[str, HeaderValue]:
    """A client's view of a response header: the schema's fields converted, unknown fields kept as text."""
    kinds = {name: kind for name, kind, _ in schema}
    return {k: _convert(k, kinds[k], v) if k in kinds else v for k, v in ext.items()}
