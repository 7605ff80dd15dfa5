"""RemotingCommand frames: golden bytes per controller code in both header serializations, and a fuzz of
lengths and headers (the decoder raises FrameError/HeaderError and nothing else)."""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Callable

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.codec import FrameDecoder, FrameError, HeaderError, RemotingCommand
from api.service.settings import MAX_FRAME_BYTES
from statemachine import codes as C

# One request per code the controller serves, extFields exactly as the Java header classes name them.
REQUESTS = {
    904: {
        "clusterName": "c1",
        "brokerAddr": "10.0.0.1:10911",
        "brokerName": "b1",
        "brokerId": "1",
        "epoch": "2",
        "maxOffset": "100",
        "confirmOffset": "90",
        "heartbeatTimeoutMills": "10000",
        "electionPriority": "3",
    },
    1001: {"brokerName": "b1", "masterBrokerId": "1", "masterEpoch": "1", "invokeTime": "1700000000000"},
    1002: {
        "clusterName": "c1",
        "brokerName": "b1",
        "brokerId": "1",
        "designateElect": "false",
        "invokeTime": "1700000000000",
    },
    1003: {
        "clusterName": "c1",
        "brokerName": "b1",
        "brokerId": "1",
        "brokerAddress": "10.0.0.1:10911",
        "invokeTime": "1700000000000",
    },
    1004: {"brokerName": "b1"},
    1005: {},
    1006: {},
    1009: {},
    1010: {},
    1011: {
        "clusterName": "c1",
        "brokerName": "b1",
        "brokerControllerIdsToClean": "1;2",
        "isCleanLivingBroker": "false",
        "invokeTime": "1700000000000",
    },
    1012: {"clusterName": "c1", "brokerName": "b1"},
    1013: {
        "clusterName": "c1",
        "brokerName": "b1",
        "appliedBrokerId": "1",
        "registerCheckCode": "10.0.0.1:10911;1700000000000",
    },
}


# The jRaft-internal codes, with the fields of RocketMQ's controller/impl/task/*Request classes. RocketMQ's
# controller puts them in its raft log and registers no processor for them: on the wire they are unknown codes.
INTERNAL = {
    1014: {"clusterName": "c1", "brokerName": "b1", "brokerId": "1"},  # BrokerCloseChannelRequest
    1015: {"checkTimeMillis": "1700000000000"},  # CheckNotActiveBrokerRequest
    1016: {"clusterName": "c1", "brokerName": "b1", "brokerId": "1"},  # GetBrokerLiveInfoRequest
    1017: {"invokeTime": "1700000000000"},  # GetSyncStateDataRequest
    1018: {  # RaftBrokerHeartBeatEventRequest
        "clusterNameIdentityInfo": "c1",
        "brokerNameIdentityInfo": "b1",
        "brokerIdIdentityInfo": "1",
        "brokerName": "b1",
        "brokerAddr": "10.0.0.1:10911",
        "heartbeatTimeoutMillis": "10000",
        "brokerId": "1",
        "lastUpdateTimestamp": "1700000000000",
        "epoch": "2",
        "maxOffset": "100",
        "confirmOffset": "90",
        "electionPriority": "3",
    },
}

# The request header classes field by field: (name, Java type, @CFNotNull), as declared in RocketMQ 5.3
# (header/controller/**, header/namesrv/BrokerHeartbeatRequestHeader). A primitive long is a Long here.
JAVA_REQUEST = {
    904: (
        ("clusterName", "String", True),
        ("brokerAddr", "String", True),
        ("brokerName", "String", True),
        ("brokerId", "Long", False),
        ("epoch", "Integer", False),
        ("maxOffset", "Long", False),
        ("confirmOffset", "Long", False),
        ("heartbeatTimeoutMills", "Long", False),
        ("electionPriority", "Integer", False),
    ),
    1001: (
        ("brokerName", "String", False),
        ("masterBrokerId", "Long", False),
        ("masterEpoch", "Integer", False),
        ("invokeTime", "Long", False),
    ),
    1002: (
        ("clusterName", "String", True),
        ("brokerName", "String", True),
        ("brokerId", "Long", True),
        ("designateElect", "Boolean", True),
        ("invokeTime", "Long", False),
    ),
    1003: (
        ("clusterName", "String", False),
        ("brokerName", "String", False),
        ("brokerId", "Long", False),
        ("brokerAddress", "String", False),
        ("invokeTime", "Long", False),
    ),
    1004: (("brokerName", "String", False),),
    1011: (
        ("clusterName", "String", False),
        ("brokerName", "String", True),
        ("brokerControllerIdsToClean", "String", False),
        ("isCleanLivingBroker", "Boolean", False),
        ("invokeTime", "Long", False),
    ),
    1012: (("clusterName", "String", False), ("brokerName", "String", False)),
    1013: (
        ("clusterName", "String", False),
        ("brokerName", "String", False),
        ("appliedBrokerId", "Long", False),
        ("registerCheckCode", "String", False),
    ),
}

# The response header classes field by field: (name, Java type), as declared in RocketMQ 5.3
# (remoting/protocol/header/controller/**). headers.RESPONSE must say exactly this.
JAVA_RESPONSE = {
    1001: (("newSyncStateSetEpoch", "Integer"),),  # AlterSyncStateSetResponseHeader (int)
    1002: (  # ElectMasterResponseHeader
        ("masterBrokerId", "Long"),
        ("masterAddress", "String"),
        ("masterEpoch", "Integer"),
        ("syncStateSetEpoch", "Integer"),
    ),
    1003: (  # RegisterBrokerToControllerResponseHeader
        ("clusterName", "String"),
        ("brokerName", "String"),
        ("masterBrokerId", "Long"),
        ("masterAddress", "String"),
        ("masterEpoch", "Integer"),
        ("syncStateSetEpoch", "Integer"),
    ),
    1004: (("masterBrokerId", "Long"), ("masterAddress", "String"), ("masterEpoch", "Integer")),
    1005: (  # GetMetaDataResponseHeader
        ("group", "String"),
        ("controllerLeaderId", "String"),
        ("controllerLeaderAddress", "String"),
        ("isLeader", "Boolean"),
        ("peers", "String"),
    ),
    1012: (("clusterName", "String"), ("brokerName", "String"), ("nextBrokerId", "Long")),
    1013: (("clusterName", "String"), ("brokerName", "String")),  # ApplyBrokerIdResponseHeader
}

# One response per code that has a header: extFields as makeCustomHeaderToNet renders the Java fields.
RESPONSES = {
    1001: {"newSyncStateSetEpoch": "3"},
    1002: {"masterBrokerId": "1", "masterAddress": "10.0.0.1:10911", "masterEpoch": "2", "syncStateSetEpoch": "3"},
    1003: {
        "clusterName": "c1",
        "brokerName": "b1",
        "masterBrokerId": "1",
        "masterAddress": "10.0.0.1:10911",
        "masterEpoch": "2",
        "syncStateSetEpoch": "3",
    },
    1004: {"masterBrokerId": "1", "masterAddress": "10.0.0.1:10911", "masterEpoch": "2"},
    1005: {
        "group": "jRaft-Controller",
        "controllerLeaderId": "10.0.0.1:9880",
        "controllerLeaderAddress": "10.0.0.1:9770",
        "isLeader": "true",
        "peers": "10.0.0.1:9770;10.0.0.2:9770;10.0.0.3:9770;",
    },
    1012: {"clusterName": "c1", "brokerName": "b1", "nextBrokerId": "2"},
    1013: {"clusterName": "c1", "brokerName": "b1"},
}


def golden_json(code: int, opaque: int, flag: int, remark: str | None, ext: dict[str, str], body: bytes) -> bytes:
    """fastjson's sorted rendering of RemotingCommand (remark left out when null), type 0 in the high byte."""
    doc: dict[str, object] = {
        "code": code,
        "extFields": ext,
        "flag": flag,
        "language": "JAVA",
        "opaque": opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": codec.VERSION,
    }
    if remark is not None:
        doc["remark"] = remark
    header = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def golden_rocketmq(code: int, opaque: int, flag: int, remark: str | None, ext: dict[str, str], body: bytes) -> bytes:
    """RocketMQSerializable's layout, written out field by field (independent of the codec)."""
    header = struct.pack(">hbhii", code, 0, codec.VERSION, opaque, flag)
    r = (remark or "").encode()
    header += struct.pack(">i", len(r)) + r
    e = b"".join(
        struct.pack(">h", len(k.encode())) + k.encode() + struct.pack(">i", len(v.encode())) + v.encode()
        for k, v in ext.items()
    )
    header += struct.pack(">i", len(e)) + e
    return struct.pack(">i", 4 + len(header) + len(body)) + bytes([1]) + len(header).to_bytes(3, "big") + header + body


def test_a_heartbeat_frame_byte_by_byte() -> None:
    cmd = RemotingCommand(904, opaque=7, ext_fields={"brokerId": "1"}, serialize_type=codec.ROCKETMQ)
    assert codec.encode(cmd).hex() == (
        "00000028"  # total: 4 + 36 header bytes, no body
        "01000024"  # ROCKETMQ (1) << 24 | 36
        "0388"
        "00"
        "01c5"
        "00000007"
        "00000000"  # code 904, JAVA, version 453, opaque 7, flag 0
        "00000000"  # no remark
        "0000000f"
        "0008"
        "62726f6b65724964"
        "00000001"
        "31"  # extFields: "brokerId" -> "1"
    )


@pytest.mark.parametrize("code", sorted(REQUESTS))
def test_golden_request_frames_both_serializations(code: int) -> None:
    ext = REQUESTS[code]
    body = b'["b1"]' if code == 1006 else b""
    want = golden_rocketmq(code, 42, 0, None, ext, body)
    cmd = RemotingCommand(code, 42, 0, None, dict(ext), body or None, serialize_type=codec.ROCKETMQ)
    assert codec.encode(cmd) == want
    assert codec.decode(FrameDecoder().feed(want)[0]) == cmd
    want_json = golden_json(code, 42, 0, None, ext, body)
    jcmd = RemotingCommand(code, 42, 0, None, dict(ext), body or None)
    assert codec.encode(jcmd) == want_json
    assert codec.decode(FrameDecoder().feed(want_json)[0]) == jcmd
    # The fields decode by the Java header class (every field is known to it).
    if code in H.REQUEST:
        assert set(ext) <= {name for name, _, _ in H.REQUEST[code]}
        H.parse(H.REQUEST[code], ext, H.DEFAULTS.get(code))


@pytest.mark.parametrize("code", sorted(INTERNAL))
def test_golden_frames_of_the_jraft_internal_codes(code: int) -> None:
    """1014-1018 frames with their Java request classes' fields, both serializations; the listener has no
    handler for them (test_remoting answers these very frames 3 REQUEST_CODE_NOT_SUPPORTED)."""
    ext = INTERNAL[code]
    for stype, golden in ((codec.ROCKETMQ, golden_rocketmq), (codec.JSON, golden_json)):
        want = golden(code, 42, 0, None, ext, b"")
        cmd = RemotingCommand(code, 42, 0, None, dict(ext), serialize_type=stype)
        assert codec.encode(cmd) == want
        assert codec.decode(FrameDecoder().feed(want)[0]) == cmd
    assert code not in H.REQUEST


def test_request_headers_are_the_java_classes_fields() -> None:
    """Names, types and @CFNotNull as Java declares them; required beyond that only where STRICTER says so."""
    java = {
        code: tuple((n, t, req or n in H.STRICTER.get(code, ())) for n, t, req in f) for code, f in JAVA_REQUEST.items()
    }
    assert H.REQUEST == java
    assert all(not any(req for n, _, req in JAVA_REQUEST[code] if n in names) for code, names in H.STRICTER.items())
    for code, ext in REQUESTS.items():  # the golden frames carry every field of their class
        assert set(ext) == {n for n, _, _ in JAVA_REQUEST.get(code, ())}, code


def test_response_headers_are_the_java_classes_fields() -> None:
    assert {code: tuple((n, t) for n, t, _ in schema) for code, schema in H.RESPONSE.items()} == JAVA_RESPONSE
    assert H.NOT_LEADER == (("controllerLeaderId", "String", False), ("controllerLeaderAddress", "String", False))


@pytest.mark.parametrize("code", sorted(RESPONSES))
def test_golden_response_frames_both_serializations(code: int) -> None:
    """A response header rendered from the typed fields (to_ext, as makeCustomHeaderToNet: toString of each
    field), byte for byte in both serializations, and typed back by a client as the Java class declares."""
    ext = RESPONSES[code]
    typed = H.typed(H.RESPONSE[code], ext)
    assert H.to_ext(typed) == ext
    assert set(typed) == {name for name, _ in JAVA_RESPONSE[code]}
    body = b'{"syncStateSet":[1],"syncStateSetEpoch":3}' if code in (1001, 1003, 1004) else b""
    for stype, golden in ((codec.ROCKETMQ, golden_rocketmq), (codec.JSON, golden_json)):
        req = RemotingCommand(code, 77, 0, serialize_type=stype)
        resp = req.response(C.SUCCESS, None, H.to_ext(typed), body or None)
        want = golden(C.SUCCESS, 77, codec.RESPONSE_FLAG, None, ext, body)
        assert codec.encode(resp) == want
        assert codec.decode(FrameDecoder().feed(want)[0]) == resp


def test_golden_not_leader_and_not_supported_answers() -> None:
    """2007 with the leader named (RocketMQ's remark) and 3 for an unknown code, as the listener writes them."""
    ext = {"controllerLeaderId": "10.0.0.1:9880", "controllerLeaderAddress": "10.0.0.1:9770"}
    for stype, golden in ((codec.ROCKETMQ, golden_rocketmq), (codec.JSON, golden_json)):
        req = RemotingCommand(1012, 5, 0, serialize_type=stype)
        resp = req.response(C.CONTROLLER_NOT_LEADER, "The controller is not in leader state", ext)
        want = golden(2007, 5, 1, "The controller is not in leader state", ext, b"")
        assert codec.encode(resp) == want
        resp = req.response(C.REQUEST_CODE_NOT_SUPPORTED, " request type 1014 not supported")
        assert codec.encode(resp) == golden(3, 5, 1, " request type 1014 not supported", {}, b"")


def test_golden_response_with_remark_and_oneway_flags() -> None:
    req = RemotingCommand(1004, 9, codec.ONEWAY_FLAG, serialize_type=codec.ROCKETMQ)
    assert req.is_oneway and not req.is_response
    resp = req.response(2008, "Broker metadata is not existed", {"masterEpoch": "0"}, b"{}")
    assert resp.is_response and resp.opaque == 9
    assert codec.encode(resp) == golden_rocketmq(
        2008, 9, 1, "Broker metadata is not existed", {"masterEpoch": "0"}, b"{}"
    )


def test_a_java_json_header_with_extra_fields_and_numbers_decodes() -> None:
    header = (
        b'{"code":904,"extFields":{"brokerId":1,"designate":true},"flag":2,"language":"JAVA","opaque":-5,'
        b'"serializeTypeCurrentRPC":"JSON","version":453,"remark":null}'
    )
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    cmd = codec.decode(FrameDecoder().feed(frame)[0])
    assert (cmd.code, cmd.opaque, cmd.is_oneway, cmd.ext_fields) == (
        904,
        -5,
        True,
        {"brokerId": "1", "designate": "true"},
    )


def test_frames_split_anywhere_reassemble() -> None:
    frames = b"".join(codec.encode(RemotingCommand(1005, i, serialize_type=i % 2)) for i in range(5))
    for cut in range(1, len(frames)):
        d = FrameDecoder()
        got = d.feed(frames[:cut]) + d.feed(frames[cut:])
        assert [codec.decode(f).opaque for f in got] == list(range(5))
        assert d.pending == 0


@pytest.mark.parametrize(
    "prefix, why",
    [
        (struct.pack(">i", 3), "below the 4 bytes"),
        (struct.pack(">i", -1), "below the 4 bytes"),
        (struct.pack(">i", 100) + struct.pack(">i", 97) + b"x" * 96, "header length 97 exceeds"),
        (struct.pack(">i", 2**30), "exceeds the maximum"),
    ],
)
def test_bad_lengths_break_the_stream(prefix: bytes, why: str) -> None:
    with pytest.raises(FrameError, match=why):
        FrameDecoder(max_frame=1 << 20).feed(prefix)


@pytest.mark.parametrize(
    "stype, header, why",
    [
        (0, b"not json", "not valid JSON"),
        (0, b"[1]", "must be an object"),
        (0, b'{"code":1,"extFields":{"brokerName":"b\\ud800"}}', "extFields\\['brokerName'\\] holds a lone surrogate"),
        (0, b'{"code":1,"remark":"\\udfff"}', "remark holds a lone surrogate"),
        (0, b"[" * 100_000, "not valid JSON: nested too deeply"),
        (0, b'{"code":1,"extFields":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_001, "nested too deeply"),
        (0, b'{"opaque":3}', "'code' must be a 32-bit integer"),
        (0, b'{"code":1,"extFields":{"a":[1]}}', "extFields\\['a'\\]"),
        (1, b"\x00\x01", "shorter than its fixed"),
        (1, struct.pack(">hbhii", 1, 0, 0, 3, 0) + struct.pack(">i", 50), "remark length 50 runs past"),
        (7, b"{}", "unknown header serialization type 7"),
    ],
)
def test_malformed_headers_name_the_problem(stype: int, header: bytes, why: str) -> None:
    frame = struct.pack(">ii", 4 + len(header), stype << 24 | len(header)) + header
    with pytest.raises(HeaderError, match=why):
        codec.decode(FrameDecoder().feed(frame)[0])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(1, 40), max_size=8))
def test_fuzz_the_decoder_only_raises_its_errors(data: bytes, cuts: list[int]) -> None:
    d = FrameDecoder(max_frame=4096)
    pos = 0
    try:
        for c in [*cuts, len(data)]:
            for frame in d.feed(data[pos : pos + c]):
                try:
                    codec.decode(frame)
                except HeaderError:
                    pass
            pos += c
    except FrameError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.text(max_size=20) | st.none(),
    st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4),
    st.binary(max_size=50),
)
def test_fuzz_round_trip(stype: int, code: int, opaque: int, remark: str | None, ext: dict, body: bytes) -> None:
    cmd = RemotingCommand(code, opaque, 0, remark or None, ext, body or None, serialize_type=stype)
    assert codec.decode(FrameDecoder().feed(codec.encode(cmd))[0]) == cmd


@pytest.mark.parametrize(
    ("head", "target"),
    [
        (b"GET /api/v1/raft/status HTTP/1.1\r\nHost: h\r\n", "/api/v1/raft/status"),
        (b"POST /api/v1/raft/peers?x=1 HTTP/1.1\r\n", "/api/v1/raft/peers?x=1"),
        (b"DELETE /a%20b HTTP/1.1\r\n", "/a%20b"),
        (b"GET ", "/"),  # the request line is not complete yet
        (b"GET /a\x00b HTTP/1.1\r\n", "/"),  # never echoed into a Location header
        (b"OPTIONS * HTTP/1.1\r\n", "/"),
        (b"GETX / HTTP/1.1\r\n", None),
        (b"\x00\x00\x00\x10\x00\x00\x00\x0c", None),
    ],
)
def test_an_http_request_line_is_recognised_and_can_never_be_a_frame(head: bytes, target: str | None) -> None:
    assert codec.http_request_target(head) == target
    if target is not None:  # as a frame length, above the largest allowed maximum (1 GiB): a broken stream
        with pytest.raises(FrameError, match="exceeds the maximum"):
            FrameDecoder(max_frame=MAX_FRAME_BYTES).feed(head)


def test_the_heartbeat_is_declared_in_two_places_and_the_rest_derives() -> None:
    """A heartbeat field is declared in api/service/requests.py (header, HTTP) and statemachine/commands.py (the
    command): the request's header fields by their command names are the command's fields, the HTTP model's
    fields are the header's, and a request with only the required fields encodes with RocketMQ's defaults."""
    from api.http.models import HeartbeatRequest
    from api.service import requests as Q
    from statemachine import commands as K

    req = Q.BrokerHeartbeat(clusterName="c", brokerAddr="a:1", brokerName="b", brokerId=1)
    assert set(Q.command_fields(req)) == set(K.BrokerHeartbeat._fields[3:])
    assert set(HeartbeatRequest.model_fields) == {name for name, _, _ in H.REQUEST[H.BROKER_HEARTBEAT]}
    assert req.command(5) == K.heartbeat(5, "c", "b", "a:1", 1)
    assert tuple(msgpack.unpackb(req.command(5))[3:]) == ("c", "b", "a:1", 1, *K.HEARTBEAT_DEFAULTS.values())


# JSON values as a header may hold them, hostile ones included: big and huge integers, floats, every kind of text.
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _outcome(loads: Callable[[bytes], object], data: bytes) -> tuple[str, str]:
    try:
        return "value", repr(loads(data))  # repr: 1 and 1.0, 0.0 and -0.0, are told apart
    except RecursionError:
        return "error", "RecursionError"
    except ValueError as e:
        return "error", f"{type(e).__name__}: {e}"


@settings(max_examples=600, deadline=None)
@given(
    _JSON_VALUES,
    st.sampled_from(["", " ", "\n\t"]),
    st.lists(st.tuples(st.integers(0, 400), st.binary(max_size=3)), max_size=3),
    st.booleans(),
)
def test_a_header_reads_as_json_loads_reads_it(value: object, space: str, edits: list, ascii_only: bool) -> None:
    """msgspec reads the headers, json.loads whatever msgspec refuses: every header, valid, damaged or hostile,
    gives json.loads's value or json.loads's error, message and position included."""
    data = bytearray(json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    data = bytearray(space.encode()) + data + bytearray(space.encode())
    for at, junk in edits:  # overwrite a few bytes anywhere: truncations, stray bytes, broken escapes
        at = min(at, len(data))
        data[at : at + len(junk)] = junk
    assert _outcome(codec.loads_header, bytes(data)) == _outcome(json.loads, bytes(data))


@pytest.mark.parametrize(
    "data",
    [
        b'"\\ud800"',  # a lone surrogate: msgspec refuses it, json.loads reads it (decode_header then refuses it)
        b"NaN",
        b"1e400",
        b"1" * 30,
        b"1" * 5000,  # past Python's 4,300 digits: json.loads's ValueError
        b"\xef\xbb\xbf{}",
        '{"a":"\u00e9"}'.encode("utf-16"),
        b'[{"a":' * 3000 + b"1" + b"}]" * 3000,
    ],
)
def test_what_msgspec_refuses_json_loads_decides(data: bytes) -> None:
    assert _outcome(codec.loads_header, data) == _outcome(json.loads, data)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.text() | st.none(),
    st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=5),
)
def test_a_json_header_is_the_bytes_json_writes(opaque: int, remark: str | None, ext: dict) -> None:
    """msgspec writes a header byte for byte as json.dumps(ensure_ascii=False, compact, sorted keys) does."""
    cmd = RemotingCommand(904, opaque, 1, remark, ext)
    try:
        frame = golden_json(904, opaque, 1, remark, ext, b"")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 header can carry it, and msgspec refuses it too
        with pytest.raises(UnicodeEncodeError):
            codec.encode_header(cmd)
        return
    assert codec.encode_header(cmd) == frame[8:]  # after the length and the header length


def _decoded(decode: Callable[[bytes], RemotingCommand], data: bytes) -> tuple[str, str]:
    try:
        return "command", repr(decode(data))
    except HeaderError as e:
        return "error", f"{e} (opaque {e.opaque})"


_FIELD_VALUES = (
    st.integers(-(2**31), 2**31 - 1)
    | st.sampled_from([2**31, -(2**31) - 1, 904.0, True, None, "904"])
    | st.text(max_size=6)
    | st.dictionaries(st.text(max_size=6), st.text(max_size=6) | st.integers(0, 9) | st.none(), max_size=3)
    | _JSON_VALUES
)
_HEADER_KEYS = ["code", "flag", "version", "opaque", "remark", "language", "extFields", "serializeTypeCurrentRPC"]


@settings(max_examples=600, deadline=None)
@given(
    st.dictionaries(st.sampled_from([*_HEADER_KEYS, "rpcType", "extfields"]), _FIELD_VALUES, max_size=9),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 200), st.binary(max_size=3)), max_size=2),
)
def test_the_typed_json_header_reads_what_the_general_way_reads(doc: dict, ascii_only: bool, edits: list) -> None:
    """A header msgspec's typed decoder takes gives the command the general way (json.loads's value, each field
    checked) gives; one it does not take goes the general way: the same command or the same error, always."""
    data = bytearray(json.dumps(doc, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    for at, junk in edits:
        at = min(at, len(data))
        data[at : at + len(junk)] = junk
    assert _decoded(codec._decode_json, bytes(data)) == _decoded(codec._decode_json_doc, bytes(data))


def test_a_java_brokers_heartbeat_header_is_read_by_the_typed_decoder() -> None:
    """What a Java broker writes (fastjson's rendering, every field) fits the typed decoder as it is."""
    header = golden_json(904, 7, 0, None, REQUESTS[904], b"")[8:]
    h = codec._PLAIN_JSON_HEADER.decode(header)
    assert (h.code, h.opaque, h.flag, h.extFields) == (904, 7, 0, REQUESTS[904])
    assert codec.decode_header(header, codec.JSON) == codec._decode_json_doc(header)


@pytest.mark.parametrize(
    "data",
    [
        b'{"code":904,"remark":"\\ud800"}',  # half a pair, escaped: no UTF-8 answer could carry it
        b'{"code":904,"extFields":{"a":"x\\udc00"}}',
        b'{"code":904,"extFields":{"\\ud800":"a"}}',
        b'{"code":904,"language":"\\ud800\\u0041"}',
        b'{"code":904,"remark":"\xed\xa0\x80"}',  # half a pair, encoded: json.loads reads it (surrogatepass)
        b'{"code":904,"remark":"\\ud83d\\ude00"}',  # a whole pair: one character
        b'{"code":904,"serializeTypeCurrentRPC":"\\ud800"}',
    ],
)
def test_a_json_header_with_half_a_surrogate_pair_decodes_as_the_general_way_decodes_it(data: bytes) -> None:
    assert _decoded(codec._decode_json, data) == _decoded(codec._decode_json_doc, data)


@settings(max_examples=300, deadline=None)
@given(
    code=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | st.text() | st.sampled_from(['"opaque":0,', 'x","opaque":0,"y', "\\u0000"]),
    ext=st.dictionaries(st.text(max_size=12) | st.just("opaque"), st.text(max_size=12) | st.just('"opaque":0,')),
    body=st.none() | st.binary(max_size=64),
    language=st.sampled_from(["JAVA", "PYTHON", "CPP"]),
    opaques=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5),
)
def test_an_answer_template_gives_each_opaque_the_frame_encode_gives(
    code: int, remark: str | None, ext: dict[str, str], body: bytes | None, language: str, opaques: list[int]
) -> None:
    """A committed entry answers all its heartbeats from one template (api/remoting/server.py): each frame must
    be `encode`'s for that opaque, whatever the remark, the fields and the body hold (an opaque's key inside a
    text included: JSON escapes its quotes)."""
    answer = RemotingCommand(code, 5, codec.RESPONSE_FLAG, remark, ext, body, language)
    template = codec.AnswerTemplate.of(answer)
    assert template is not None
    for opaque in [0, -1, 2**31 - 1, -(2**31), *opaques]:
        assert template.frame(opaque) == codec.encode(dataclasses.replace(answer, opaque=opaque))


def test_an_answer_template_is_for_json_headers_only() -> None:
    """A ROCKETMQ header is fixed binary fields: the caller encodes each answer (None here)."""
    assert codec.AnswerTemplate.of(RemotingCommand(0, 1, codec.RESPONSE_FLAG, serialize_type=codec.ROCKETMQ)) is None
