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
    HEADER_BYTES,
    CodecError,
    FrameReader,
    decode_batch,
    decode_messages,
    encode_batch,
    encode_message,
    encode_messages,
    frame_header,
    frame_key,
    frame_tag,
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
    return ConfState(tuple(members[:split]), tuple(members[split:]))


snapshots = st.none() | st.builds(SnapshotMeta, u64, u64, conf_states())
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
)


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
        MsgType.APP, "n1", "n2", 3, 2, 10, [Entry(3, 11, 0, b"xyz")], 9,
        snapshot=SnapshotMeta(1, 1, ConfState(("n1",))),
    )  # fmt: skip
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
        "type": 1, "frm": "a", "to": "b", "term": 1, "log_term": 0, "index": 0, "entries": [], "commit": 0,
        "reject": False, "reject_hint": 0, "hint_term": 0, "seq": 0, "snapshot": None, "force": False,
    }  # fmt: skip
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
    [b"", b"\x02" + msgpack.packb(["a", []]), b"\x01", b"\x01" + msgpack.packb(["a"]), b"\x01" + msgpack.packb([1, []])],
    ids=["empty", "unknown kind", "kind only", "no messages", "int sender"],
)
def test_bad_batches(payload: bytes) -> None:
    with pytest.raises(CodecError):
        decode_batch(payload)


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
        return [leaf for k, v in enumerate(x) for leaf in _leaves(v, (*path, k))]  # type: ignore[arg-type]
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


# --- frames -------------------------------------------------------------------------------------------------

KEY = frame_key(b"cluster secret")


def frame(payload: bytes, key: bytes = KEY) -> bytes:
    return frame_header(payload, key) + payload


def test_frame_layout() -> None:
    payload = b"\x01hello"
    f = frame(payload)
    assert f[:4] == len(payload).to_bytes(4, "big")
    assert f[4:HEADER_BYTES] == frame_tag(payload, KEY) and len(f[4:HEADER_BYTES]) == 16
    assert f[HEADER_BYTES:] == payload


def test_tags_depend_on_key_and_every_payload_byte() -> None:
    payload = encode_batch("a", [encode_message(app(4, 8))])
    tag = frame_tag(payload, KEY)
    assert verify(tag, payload, KEY)
    assert not verify(tag, payload, frame_key(b"another secret"))
    for i in range(len(payload)):
        tampered = bytearray(payload)
        tampered[i] ^= 0x01
        assert not verify(tag, bytes(tampered), KEY)


def test_frame_key_accepts_any_nonempty_secret() -> None:
    assert frame_key(b"k" * 64) == b"k" * 64
    assert len(frame_key(b"k" * 1000)) == 64 and frame_key(b"k" * 1000) != frame_key(b"k" * 1001)
    with pytest.raises(ValueError):
        frame_key(b"")


def test_reader_splits_a_stream_fed_byte_by_byte() -> None:
    payloads = [b"", b"a", b"x" * 1000, encode_batch("n", [encode_message(app(3, 5))])]
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader(max_frame_bytes=4096)
    got = [f for i in range(len(stream)) for f in reader.feed(stream[i : i + 1])]
    assert got == [(frame_tag(p, KEY), p) for p in payloads]
    assert reader.buffered == 0 and reader.error is None


def test_reader_returns_all_frames_of_one_chunk() -> None:
    reader = FrameReader(max_frame_bytes=100)
    frames = reader.feed(frame(b"1") + frame(b"22") + frame(b"333")[:-1])
    assert [p for _, p in frames] == [b"1", b"22"]
    assert [p for _, p in reader.feed(b"3")] == [b"333"]


def test_reader_rejects_an_oversized_frame_but_keeps_earlier_ones() -> None:
    reader = FrameReader(max_frame_bytes=10)
    frames = reader.feed(frame(b"ok") + (11).to_bytes(4, "big") + bytes(16 + 11))
    assert [p for _, p in frames] == [b"ok"]
    assert reader.error is not None and "11 bytes" in reader.error
    assert reader.feed(frame(b"later")) == []  # the stream is lost


def test_reader_buffers_a_large_frame_in_linear_time() -> None:
    payload = bytes(range(256)) * (32 * 1024)  # 8 MiB in 4 KiB chunks: quadratic copying would take minutes
    stream = frame(payload)
    reader = FrameReader(max_frame_bytes=len(payload))
    got = [f for i in range(0, len(stream), 4096) for f in reader.feed(stream[i : i + 4096])]
    assert len(got) == 1 and got[0][1] == payload
