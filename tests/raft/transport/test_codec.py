"""raft.transport.codec: messages round-trip exactly, malformed bytes only ever raise CodecError, frames split."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raft.core.messages import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MsgType,
    SnapshotMeta,
)
from raft.transport.codec import (
    MAX_HEADER_BYTES,
    CodecError,
    FrameReader,
    decode_batch,
    decode_messages,
    decode_snapshot_payload,
    encode_batch,
    encode_message,
    encode_messages,
    encode_snapshot_payload,
    frame_header,
    frame_key,
    frame_tag,
    header_bytes,
    verify,
)

# --- strategies ---------------------------------------------------------------------------------------------

ids = st.text(max_size=12)  # any unicode except lone surrogates (which no str id can carry over UTF-8)
u64 = st.integers(min_value=0, max_value=2**64 - 1)
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
entries = st.builds(Entry, u64, u64, st.sampled_from(EntryType) | i64, st.binary(max_size=300))


@st.composite
def conf_states(draw: st.DrawFn) -> ConfState:
    members = draw(st.lists(ids, unique=True, max_size=7))
    split = draw(st.integers(0, len(members)))
    known = sorted(draw(st.sets(st.sampled_from(members)))) if members else []
    http = draw(st.sampled_from(["", "10.0.0.1:8770"]))
    remoting = draw(st.sampled_from(["", "10.0.0.1:9770"]))
    return ConfState(
        tuple(members[:split]), tuple(members[split:]), tuple((m, f"{m}:9880", http, remoting) for m in known)
    )


snapshots = st.none() | st.builds(SnapshotMeta, u64, u64, conf_states())


def as_sent(m: Message) -> Message:
    """The core sends an APP's entries as one run after `index` (the codec refuses anything else)."""
    if m.type == MsgType.APP and m.entries:
        m.index = min(m.index, 2**64 - 1 - len(m.entries))
        m.entries = [Entry(e.term, m.index + 1 + k, e.type, e.data) for k, e in enumerate(m.entries)]
    return m


messages = st.builds(
    Message,
    type=st.sampled_from(MsgType),
    frm=ids,
    to=ids,
    term=u64,
    log_term=u64,
    index=u64,
    entries=st.lists(entries, max_size=8),
    commit=u64,
    reject=st.booleans(),
    reject_hint=i64,
    hint_term=u64,
    seq=u64,
    snapshot=snapshots,
    force=st.booleans(),
).map(as_sent)


def app(n: int = 64, size: int = 256) -> Message:
    ents = [Entry(7, 101 + i, EntryType.NORMAL, bytes([i]) * size) for i in range(n)]
    return Message(MsgType.APP, "n1", "n2", term=7, log_term=6, index=100, entries=ents, commit=99)


# --- round trips --------------------------------------------------------------------------------------------


@given(st.lists(messages, max_size=5))
def test_messages_round_trip(msgs: list[Message]) -> None:
    assert decode_messages(encode_messages(msgs)) == msgs


@given(ids, st.lists(messages, max_size=5))
def test_batch_round_trip(sender: str, msgs: list[Message]) -> None:
    assert decode_batch(encode_batch(sender, [encode_message(m) for m in msgs])) == (sender, msgs)


def test_decoded_types_are_exact() -> None:
    m = Message(MsgType.SNAP, "a", "b", snapshot=SnapshotMeta(5, 2, ConfState(("a", "b"), ("c",))), reject=True)
    (d,) = decode_messages(encode_messages([m]))
    assert d.type is MsgType.SNAP
    assert d.reject is True and d.force is False
    assert d.snapshot is not None
    assert d.snapshot == m.snapshot and type(d.snapshot.conf.voters) is tuple
    assert type(d.entries) is list


def test_int_flags_are_encoded_as_bools() -> None:
    m = Message(MsgType.APP_RESP, "a", "b", reject=1)  # type: ignore[arg-type]
    assert decode_messages(encode_messages([m]))[0].reject is True


def test_unencodable_message_raises_codec_error() -> None:
    with pytest.raises(CodecError, match="cannot encode"):
        encode_message(Message(MsgType.APP, "a", "b", term=2**64))


def test_app_64x256_is_compact() -> None:
    encoded = encode_messages([app()])
    # payload bytes plus a few bytes of framing per entry: no field names on the wire
    assert len(encoded) < 64 * (256 + 16) + 64


# --- malformed input ----------------------------------------------------------------------------------------


def test_every_truncation_is_a_codec_error() -> None:
    m = Message(
        MsgType.APP,
        "n1",
        "n2",
        3,
        2,
        10,
        [Entry(3, 11, 0, b"xyz")],
        9,
        snapshot=SnapshotMeta(1, 1, ConfState(("n1",))),
    )
    data = encode_messages([m])
    for cut in range(len(data)):
        with pytest.raises(CodecError):
            decode_messages(data[:cut])
    payload = encode_batch("n1", [encode_message(m)])
    for cut in range(len(payload)):
        with pytest.raises(CodecError):
            decode_batch(payload[:cut])


def _fields(**over: object) -> list[object]:
    base: dict[str, object] = {
        "type": 1,
        "frm": "a",
        "to": "b",
        "term": 1,
        "log_term": 0,
        "index": 0,
        "entries": [],
        "commit": 0,
        "reject": False,
        "reject_hint": 0,
        "hint_term": 0,
        "seq": 0,
        "snapshot": None,
        "force": False,
    }
    base.update(over)
    return list(base.values())


WRONG_SHAPES = {
    "not an array": 5,
    "a map": {"type": 1},
    "message not an array": [7],
    "message too short": [_fields()[:13]],
    "message too long": [[*_fields(), 0]],
    "unknown type": [_fields(type=99)],
    "bool type": [_fields(type=True)],
    "str term": [_fields(term="1")],
    "float commit": [_fields(commit=1.0)],
    "int frm": [_fields(frm=1)],
    "bytes to": [_fields(to=b"b")],
    "int reject": [_fields(reject=1)],
    "none force": [_fields(force=None)],
    "entries not an array": [_fields(entries=b"")],
    "entry not an array": [_fields(entries=[5])],
    "entry of 3": [_fields(entries=[[1, 2, 0]])],
    "entry of 5": [_fields(entries=[[1, 2, 0, b"", 0]])],
    "entry data str": [_fields(entries=[[1, 2, 0, "x"]])],
    "entry term bool": [_fields(entries=[[True, 2, 0, b""]])],
    "entry as str": [_fields(entries=["abcd"])],
    "snapshot not an array": [_fields(snapshot=3)],
    "snapshot of 3": [_fields(snapshot=[1, 1, []])],
    "snapshot voter int": [_fields(snapshot=[1, 1, [1], []])],
    "snapshot voter and learner": [_fields(snapshot=[1, 1, ["a"], ["a"]])],
}


@pytest.mark.parametrize("obj", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_wrong_shapes(obj: object) -> None:
    with pytest.raises(CodecError):
        decode_messages(msgpack.packb(obj, use_bin_type=True))


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x02" + msgpack.packb(["a", []]),
        b"\x01",
        b"\x01" + msgpack.packb(["a"]),
        b"\x01" + msgpack.packb([1, []]),
    ],
    ids=["empty", "unknown kind", "kind only", "no messages", "int sender"],
)
def test_bad_batches(payload: bytes) -> None:
    with pytest.raises(CodecError):
        decode_batch(payload)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x02\xc1", "not a msgpack value"),
        (b"\x02" + msgpack.packb(["a"]), r"must be \[sender, \[field, \.\.\.\]\], got"),
        (b"\x02" + msgpack.packb([1, []]), r"must be \[sender, \[field, \.\.\.\]\], got"),
        (b"\x02" + msgpack.packb(["a", 1]), r"must be \[sender, \[field, \.\.\.\]\], got"),
        (b"\x01" + msgpack.packb(["a", []]), "not a snapshot frame"),
    ],
    ids=["not msgpack", "no body", "int sender", "body not an array", "a messages frame"],
)
def test_bad_snapshot_payloads(payload: bytes, reason: str) -> None:
    """The snapshot frame's [sender, [field, ...]] is checked as the messages frame's is, naming its shape."""
    with pytest.raises(CodecError, match=reason):
        decode_snapshot_payload(payload)


def test_snapshot_payload_round_trip() -> None:
    assert decode_snapshot_payload(encode_snapshot_payload("n1", [1, "x", b"\x00"])) == ("n1", (1, "x", b"\x00"))


def test_trailing_bytes_and_deep_nesting() -> None:
    with pytest.raises(CodecError):
        decode_messages(encode_messages([]) + b"\x00")
    with pytest.raises(CodecError):
        decode_messages(b"\x91" * 100_000)  # nested arrays beyond msgpack's stack limit


def _exact(x: object) -> object:
    """x with every scalar tagged by its exact type, so that True and 1, or b"a" and "a", compare unequal."""
    if type(x) in (list, tuple):
        return ("array", tuple(_exact(v) for v in x))  # type: ignore[attr-defined]
    return (type(x).__name__, x)


def _generic(data: bytes) -> object:
    return _exact(msgpack.unpackb(data, raw=False))


def _is_well_formed(m: Message) -> bool:
    ints = (m.term, m.log_term, m.index, m.commit, m.reject_hint, m.hint_term, m.seq)
    snap = m.snapshot
    return (
        type(m.type) is MsgType
        and type(m.frm) is str
        and type(m.to) is str
        and all(type(v) is int for v in ints)
        and type(m.reject) is bool
        and type(m.force) is bool
        and type(m.entries) is list
        and all([type(v) for v in (e.term, e.index, e.type, e.data)] == [int, int, int, bytes] for e in m.entries)
        and (
            snap is None
            or (type(snap.index) is int and type(snap.term) is int and all(type(i) is str for i in snap.conf.members()))
        )
    )


def assert_rejected_unless_valid(data: bytes) -> None:
    """Damaged input is rejected with CodecError. Only bytes that happen to be a valid encoding are accepted,
    and then they decode to well-formed messages saying exactly what the bytes say: nothing dropped,
    repaired or coerced (re-encoding them gives the same msgpack value, types included)."""
    try:
        msgs = decode_messages(data)
    except CodecError:
        pass
    else:
        assert all(_is_well_formed(m) for m in msgs), msgs
        assert _generic(encode_messages(msgs)) == _generic(data)
    try:
        sender, msgs = decode_batch(data)
    except CodecError:
        pass
    else:
        assert type(sender) is str and all(_is_well_formed(m) for m in msgs), msgs
        again = encode_batch(sender, [encode_message(m) for m in msgs])
        assert again[0] == data[0] and _generic(again[1:]) == _generic(data[1:])


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_garbage_is_rejected_unless_valid(data: bytes) -> None:
    assert_rejected_unless_valid(data)


msgpack_values = st.recursive(
    st.none() | st.booleans() | i64 | st.floats() | st.text(max_size=5) | st.binary(max_size=5),
    lambda inner: st.lists(inner, max_size=15) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=40,
)


@settings(max_examples=300)
@given(msgpack_values)
def test_arbitrary_msgpack_is_rejected_unless_valid(obj: object) -> None:
    data = msgpack.packb(obj, use_bin_type=True)
    assert_rejected_unless_valid(data)
    assert_rejected_unless_valid(bytes((1,)) + data)  # as a batch payload


def _leaves(x: object, path: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], object]]:
    if type(x) is list:
        return [leaf for k, v in enumerate(x) for leaf in _leaves(v, (*path, k))]
    return [(path, x)]


def _replaced(x: object, path: tuple[int, ...], value: object) -> object:
    if not path:
        return value
    assert type(x) is list
    return [_replaced(v, path[1:], value) if k == path[0] else v for k, v in enumerate(x)]


@settings(max_examples=300)
@given(messages, st.data())
def test_mutated_encodings_are_rejected_unless_valid(m: Message, data: st.DataObject) -> None:
    for encoded in (bytearray(encode_messages([m])), bytearray(encode_batch("a", [encode_message(m)]))):
        i = data.draw(st.integers(0, len(encoded) - 1))
        encoded[i] = data.draw(st.integers(0, 255))
        assert_rejected_unless_valid(bytes(encoded))
    # A field (or entry part, or snapshot member) of another type than the format's is always damage.
    tree = msgpack.unpackb(encode_messages([m]), raw=False)
    path, old = data.draw(st.sampled_from([leaf for leaf in _leaves(tree) if leaf[1] is not None]))
    value = data.draw(msgpack_values.filter(lambda v: type(v) is not type(old)))
    with pytest.raises(CodecError):
        decode_messages(msgpack.packb(_replaced(tree, path, value), use_bin_type=True))


# --- frames ---------------------------------------------------------------------------------------------------

KEY = frame_key(b"cluster secret")


def frame(payload: bytes, key: bytes = KEY, sender: str = "n1") -> bytes:
    return frame_header(sender.encode(), payload, key) + payload


def test_frame_layout() -> None:
    payload = b"\x01hello"
    f = frame(payload)
    assert f[:4] == len(payload).to_bytes(4, "big") and f[4] == 2 and f[5:7] == b"n1"
    assert f[7:23] == frame_tag(payload, KEY)  # the body tag, inside the authenticated header
    assert len(f) - len(payload) == header_bytes("n1") == 4 + 1 + 2 + 16 + 16 and f[39:] == payload


def test_tags_depend_on_key_and_every_payload_byte() -> None:
    payload = encode_batch("a", [encode_message(app(4, 8))])
    tag = frame_tag(payload, KEY)
    assert verify(tag, payload, KEY)
    assert not verify(tag, payload, frame_key(b"another secret"))
    for i in range(len(payload)):
        tampered = bytearray(payload)
        tampered[i] ^= 0x01
        assert not verify(tag, bytes(tampered), KEY)


def test_every_header_and_payload_byte_is_authenticated() -> None:
    """Issue 12, bug 7: flipping any byte of a frame (header or payload) fails authentication, and a header
    is judged on its own bytes, before its payload arrives."""
    payload = b"\x01" + bytes(range(40))
    good = frame(payload)
    for i in range(len(good)):
        bad = bytearray(good)
        bad[i] ^= 0x01
        reader = FrameReader(max_frame_bytes=1 << 20, key=KEY)
        cut = header_bytes("n1") if i < header_bytes("n1") and i != 4 else len(bad)
        assert reader.feed(bytes(bad[:cut])) == [], i
        if i == 4:  # the sender length: the header is now longer or shorter; the rest decides
            reader.feed(bytes(bad[cut:]) + bytes(300))
        assert reader.error is not None and reader.auth_failed, i
        assert reader.authenticated == (i >= header_bytes("n1")) and reader.buffered == 0, i
    assert FrameReader(1 << 20, KEY).feed(good) == [("n1", payload)]


def test_frame_key_accepts_any_nonempty_secret() -> None:
    assert frame_key(b"k" * 64) == b"k" * 64
    assert len(frame_key(b"k" * 1000)) == 64 and frame_key(b"k" * 1000) != frame_key(b"k" * 1001)
    with pytest.raises(ValueError):
        frame_key(b"")
    with pytest.raises(ValueError, match="255"):
        header_bytes("x" * 256)
    assert header_bytes("\u00e9" * 127) == MAX_HEADER_BYTES - 1  # 254 bytes of UTF-8


def test_reader_splits_a_stream_fed_byte_by_byte() -> None:
    payloads = [b"", b"a", b"x" * 1000, encode_batch("n", [encode_message(app(3, 5))])]
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader(max_frame_bytes=4096, key=KEY)
    got = [f for i in range(len(stream)) for f in reader.feed(stream[i : i + 1])]
    assert got == [("n1", p) for p in payloads]
    assert reader.buffered == 0 and reader.error is None and reader.sender == "n1"


def test_reader_returns_all_frames_of_one_chunk() -> None:
    reader = FrameReader(max_frame_bytes=100, key=KEY)
    frames = reader.feed(frame(b"1") + frame(b"22") + frame(b"333")[:-1])
    assert [p for _, p in frames] == [b"1", b"22"]
    assert [p for _, p in reader.feed(b"3")] == [b"333"]


def test_reader_rejects_an_oversized_frame_but_keeps_earlier_ones() -> None:
    reader = FrameReader(max_frame_bytes=10, key=KEY)
    big = frame_header(b"n1", bytes(11), KEY)  # authenticated, too long: refused on the header alone
    frames = reader.feed(frame(b"ok") + big)
    assert [p for _, p in frames] == [b"ok"]
    assert reader.error is not None and "11 bytes" in reader.error and not reader.auth_failed
    assert reader.feed(frame(b"later")) == []  # the stream is lost


def test_reader_refuses_a_second_sender_on_one_connection() -> None:
    reader = FrameReader(max_frame_bytes=100, key=KEY)
    assert reader.feed(frame(b"a") + frame(b"b", sender="n2")) == [("n1", b"a")]
    assert reader.error is not None and "sender changed" in reader.error


def test_reader_buffers_a_large_frame_in_linear_time() -> None:
    payload = bytes(range(256)) * (32 * 1024)  # 8 MiB in 4 KiB chunks: quadratic copying would take minutes
    stream = frame(payload)
    reader = FrameReader(max_frame_bytes=len(payload), key=KEY)
    got = [f for i in range(0, len(stream), 4096) for f in reader.feed(stream[i : i + 4096])]
    assert len(got) == 1 and got[0][1] == payload


def test_app_entries_must_run_on_from_index() -> None:
    """Issue 12, bug 7: the core appends an APP's entries as a run after `index`; anything else is refused."""

    def app_with(indexes: list[int], kind: MsgType = MsgType.APP) -> bytes:
        return encode_messages([Message(kind, "a", "b", 1, 1, 10, [Entry(1, i, 0, b"") for i in indexes])])

    assert [e.index for e in decode_messages(app_with([11, 12, 13]))[0].entries] == [11, 12, 13]
    for bad in ([11, 13], [12, 13], [11, 11], [10], [11, 12, 12]):
        with pytest.raises(CodecError, match="non-contiguous"):
            decode_messages(app_with(bad))
    assert len(decode_messages(app_with([5, 3], MsgType.HEARTBEAT))[0].entries) == 2  # only APP entries are a run


def test_snapshot_meta_carries_member_addresses_in_a_fifth_element_only_when_there_are_some() -> None:
    """Issue 12, bug 5: a SNAP installs the leader's configuration, addresses included; without addresses
    the meta keeps its 4-element form (docs/wire-format.md), so older peers still read it."""
    plain = SnapshotMeta(100, 2, ConfState(("n1", "n2"), ("n3",)))
    m = Message(MsgType.SNAP, "n1", "n2", 3, snapshot=plain)
    assert encode_message(m).hex(" ") == (
        "9e 09 a2 6e 31 a2 6e 32 03 00 00 90 00 c2 00 00 00 94 64 02 92 a2 6e 31 a2 6e 32 91 a2 6e 33 c2"
    )
    conf = ConfState(("n1", "n2"), ("n3",), (("n3", "h3:1", "h3:2", ""),))
    m.snapshot = SnapshotMeta(100, 2, conf)
    data = encode_message(m)
    assert "95 64 02 92 a2 6e 31 a2 6e 32 91 a2 6e 33 91 93 a2 6e 33 a4 68 33 3a 31 a4 68 33 3a 32" in data.hex(" ")
    (back,) = decode_messages(encode_messages([m]))
    assert back.snapshot == SnapshotMeta(100, 2, conf)
    # A member whose remoting address is known is sent with it as a fourth string; one without, as before.
    conf = ConfState(("n1", "n2"), ("n3",), (("n2", "h2:1", "", ""), ("n3", "h3:1", "h3:2", "h3:3")))
    m.snapshot = SnapshotMeta(100, 2, conf)
    data = encode_message(m)
    assert "92 93 a2 6e 32 a4 68 32 3a 31 a0 94 a2 6e 33 a4 68 33 3a 31 a4 68 33 3a 32 a4 68 33 3a 33" in data.hex(" ")
    (back,) = decode_messages(encode_messages([m]))
    assert back.snapshot == SnapshotMeta(100, 2, conf)
    fields = list(msgpack.unpackb(data, use_list=False))
    for bad in ((("n3", "h3:1"),), (("n3", "h3:1", 2),), "n3", (("n9", "h:1", ""),), (("n3", "a", "b", "c", "d"),)):
        fields[12] = (100, 2, ("n1", "n2"), ("n3",), bad)
        with pytest.raises(CodecError):
            decode_messages(msgpack.packb([fields]))


def test_the_heartbeat_frame_of_docs_wire_format() -> None:
    m = Message(MsgType.HEARTBEAT, "n1", "n2", 3, commit=9, seq=7)
    payload = encode_batch("n1", [encode_message(m)])
    f = frame_header(b"n1", payload, frame_key(b"example-secret")) + payload
    assert f.hex(" ") == (
        "00 00 00 19 02 6e 31 17 b2 bb 19 6c d1 03 11 94 7a 4e c9 c5 f0 bb 64 29 a5 28 f8 1e 39 f5 41 54 d9 24 06 6c "
        "fe d1 08 01 92 a2 6e 31 91 9e 07 a2 6e 31 a2 6e 32 03 00 00 90 09 c2 00 00 07 c0 c2"
    )
