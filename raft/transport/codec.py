"""Wire codec: `Message` <-> msgpack bytes, and the authenticated frame around a batch of them.

Sans-IO: nothing here touches a socket or an event loop, so every byte layout is unit-testable. The layout
is specified byte by byte in docs/wire-format.md; keep the two in step.

Messages are positional msgpack arrays (no field names on the wire) in `Message` field order. Per-entry
work is the hot path (anchors §7: ~1-3 µs per entry), so entries are plain 4-tuples packed and unpacked in
one C call each way, and validated with a single comprehension; everything else is per message or per frame.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable, Sequence

import msgpack

from raft.core.messages import ConfState, Entry, Message, MsgType, SnapshotMeta, member, member_fields
from raft.status import RaftBaseError


class CodecError(RaftBaseError, ValueError):
    """Bytes that are not a valid encoding (truncated, garbage, wrong shape or type)."""


# --- messages ---------------------------------------------------------------------------------------------

_MESSAGE_FIELDS = 14  # Message has 14 fields; a different arity is a different wire version
_MSG_TYPES: dict[int, MsgType] = {int(t): t for t in MsgType}

# Reusing one Packer saves ~0.5 µs per call over msgpack.packb. Packer.pack runs entirely in C under the GIL
# (we pass no `default` hook, so it never calls back into Python) and resets itself on error, so sharing it
# between threads is safe on GIL builds of CPython.
_packer = msgpack.Packer(use_bin_type=True)


def _unpack(data: bytes | memoryview) -> object:
    # Maps and ext types never occur in our format; refusing them up front keeps hostile input cheap.
    return msgpack.unpackb(data, use_list=False, raw=False, max_map_len=0, max_ext_len=0)


def _message_tuple(m: Message) -> tuple[object, ...]:
    snap = m.snapshot
    return (
        m.type,
        m.frm,
        m.to,
        m.term,
        m.log_term,
        m.index,
        [(e.term, e.index, e.type, e.data) for e in m.entries],
        m.commit,
        bool(m.reject),  # a core that sets reject=1 must still produce a valid frame
        m.reject_hint,
        m.hint_term,
        m.seq,
        None if snap is None else _snapshot_tuple(snap),
        bool(m.force),
    )


def _snapshot_tuple(snap: SnapshotMeta) -> tuple[object, ...]:
    conf = snap.conf
    if conf.addresses:  # the 5-element form only when there is something to carry (older peers read 4)
        return (snap.index, snap.term, conf.voters, conf.learners, [member_fields(a) for a in conf.addresses])
    return (snap.index, snap.term, conf.voters, conf.learners)


def encode_message(m: Message) -> bytes:
    """One message as a msgpack array. Raises CodecError for values msgpack cannot hold (e.g. ints > 2**64)."""
    try:
        return _packer.pack(_message_tuple(m))
    except (TypeError, ValueError, OverflowError) as e:
        raise CodecError(f"cannot encode {m.type!r} message {m.frm!r}->{m.to!r}: {e}") from e


def encode_messages(msgs: Iterable[Message]) -> bytes:
    """A msgpack array of messages (one pack call for the whole batch)."""
    try:
        return _packer.pack([_message_tuple(m) for m in msgs])
    except (TypeError, ValueError, OverflowError) as e:
        raise CodecError(f"cannot encode messages: {e}") from e


def decode_messages(data: bytes | memoryview) -> list[Message]:
    """Inverse of encode_messages. Any malformed input raises CodecError, never another exception type."""
    try:
        obj = _unpack(data)
    except Exception as e:  # msgpack raises a zoo of types (ExtraData, FormatError, StackError, ValueError...)
        raise CodecError(f"not a msgpack value: {e}") from e
    if type(obj) is not tuple:
        raise CodecError(f"expected an array of messages, got {type(obj).__name__}")
    return [_message_from(a) for a in obj]


def _message_from(a: object) -> Message:
    if type(a) is not tuple or len(a) != _MESSAGE_FIELDS:
        raise CodecError(f"a message must be an array of {_MESSAGE_FIELDS} fields, got {_describe(a)}")
    typ, frm, to, term, log_term, index, ents, commit, reject, reject_hint, hint_term, seq, snap, force = a
    mtype = _MSG_TYPES.get(typ) if type(typ) is int else None  # type check first: True == 1 as a dict key
    if mtype is None:
        raise CodecError(f"unknown message type {typ!r}")
    if type(frm) is not str or type(to) is not str:
        raise CodecError(f"message ids must be strings, got frm={frm!r} to={to!r}")
    for v in (term, log_term, index, commit, reject_hint, hint_term, seq):
        if type(v) is not int:
            raise CodecError(f"{mtype.name} message has a non-integer field {v!r}")
    if type(reject) is not bool or type(force) is not bool:
        raise CodecError(f"{mtype.name} message has non-boolean flags reject={reject!r} force={force!r}")
    entries = _entries_from(ents)
    if (
        entries
        and mtype is MsgType.APP
        and (entries[0].index != index + 1 or any(e.index != index + 1 + k for k, e in enumerate(entries)))
    ):
        # The core appends them as a run after `index`; a gap or a repeat would corrupt its log.
        raise CodecError(f"APP after index {index} carries non-contiguous entries {[e.index for e in entries][:8]}")
    return Message(
        mtype,
        frm,
        to,
        term,
        log_term,
        index,
        entries,
        commit,
        reject,
        reject_hint,
        hint_term,
        seq,
        None if snap is None else _snapshot_from(snap),
        force,
    )


def _entries_from(ents: object, int_: type[int] = int, bytes_: type[bytes] = bytes) -> list[Entry]:
    if type(ents) is not tuple:
        raise CodecError(f"entries must be an array, got {_describe(ents)}")
    try:
        # The hot loop: one comprehension that unpacks, type-checks and builds; a rejected entry shows up
        # as a length mismatch, so the common case pays no extra pass. Locals (int_, bytes_) are faster.
        out = [
            Entry(t, i, k, d)
            for t, i, k, d in ents
            if type(t) is int_ and type(i) is int_ and type(k) is int_ and type(d) is bytes_
        ]
    except (TypeError, ValueError) as e:  # an entry that is not a 4-element array
        raise CodecError(f"an entry must be an array [term, index, type, data]: {e}") from e
    if len(out) != len(ents):
        bad = next(e for e in ents if not _is_entry(e))
        raise CodecError(f"an entry must be [int, int, int, bytes], got {bad!r:.200}")
    return out


def _is_entry(e: Sequence[object]) -> bool:
    return [type(x) for x in e] == [int, int, int, bytes]


def _snapshot_from(s: object) -> SnapshotMeta:
    if type(s) is not tuple or len(s) not in (4, 5):
        raise CodecError(f"snapshot meta must be [index, term, voters, learners(, addresses)], got {_describe(s)}")
    index, term, voters, learners = s[:4]
    addresses = s[4] if len(s) == 5 else ()
    if type(index) is not int or type(term) is not int:
        raise CodecError(f"snapshot index and term must be integers, got {index!r}, {term!r}")
    for ids in (voters, learners):
        if type(ids) is not tuple or not all(type(x) is str for x in ids):
            raise CodecError(f"snapshot voters and learners must be arrays of strings, got {ids!r:.200}")
    if type(addresses) is not tuple or not all(
        type(a) is tuple and len(a) in (3, 4) and all(type(x) is str for x in a) for a in addresses
    ):
        raise CodecError(
            f"snapshot addresses must be an array of [id, raft, http(, remoting)] strings, got {addresses!r:.200}"
        )
    try:
        conf = ConfState(voters, learners, tuple(member(a) for a in addresses))
    except ValueError as e:  # a node both voter and learner
        raise CodecError(str(e)) from e
    return SnapshotMeta(index, term, conf)


def _describe(x: object) -> str:
    return f"array of {len(x)}" if type(x) is tuple else type(x).__name__


# --- batches: the payload of one frame --------------------------------------------------------------------

KIND_MESSAGES = 1  # payload = kind byte | msgpack [sender, [message, ...]]
KIND_SNAPSHOT = 2  # payload = kind byte | msgpack [sender, [field, ...]]: InstallSnapshot chunk traffic
# Kinds 3.. are reserved; a receiver drops kinds it does not know.


def encode_batch(sender: str, packed: Sequence[bytes]) -> bytes:
    """A frame payload from messages already packed by encode_message.

    Messages are packed once, at send() time (which also fixes their size for the outbound cap); the batch
    is then only a header plus a join, with no per-message work.
    """
    head = _packer.pack_array_header(2) + _packer.pack(sender) + _packer.pack_array_header(len(packed))
    return b"".join((bytes((KIND_MESSAGES,)), head, *packed))


def decode_batch(payload: bytes | memoryview) -> tuple[str, list[Message]]:
    """Inverse of encode_batch: (sender id, messages). Raises CodecError on any malformed payload."""
    if len(payload) < 1:
        raise CodecError("empty frame payload")
    if payload[0] != KIND_MESSAGES:
        raise CodecError(f"unknown frame kind {payload[0]}")
    sender, messages = _sender_and_items(payload, "frame payload must be [sender, [message, ...]]")
    return sender, [_message_from(a) for a in messages]


def encode_snapshot_payload(sender: str, body: Sequence[object]) -> bytes:
    """A KIND_SNAPSHOT frame payload. `body` is an InstallSnapshot request or response (raft.node.install).
    Thread-safe (no shared packer): the leader encodes its chunk answers on its snapshot-serving threads."""
    try:
        return bytes((KIND_SNAPSHOT,)) + msgpack.packb((sender, tuple(body)), use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:
        raise CodecError(f"cannot encode snapshot frame: {e}") from e


def frame_kind(payload: bytes | memoryview) -> int:
    if len(payload) < 1:
        raise CodecError("empty frame payload")
    return payload[0]


def decode_snapshot_payload(payload: bytes | memoryview) -> tuple[str, tuple[object, ...]]:
    """Inverse of encode_snapshot_payload: (sender, body). The body's fields are checked by its consumer."""
    if len(payload) < 1 or payload[0] != KIND_SNAPSHOT:
        raise CodecError("not a snapshot frame")
    return _sender_and_items(payload, "snapshot frame payload must be [sender, [field, ...]]")


def _sender_and_items(payload: bytes | memoryview, shape: str) -> tuple[str, tuple[object, ...]]:
    """The [sender, [item, ...]] array after a frame's kind byte (both frame kinds have this shape)."""
    try:
        obj = _unpack(memoryview(payload)[1:])
    except Exception as e:  # see decode_messages
        raise CodecError(f"frame payload is not a msgpack value: {e}") from e
    if type(obj) is not tuple or len(obj) != 2 or type(obj[0]) is not str or type(obj[1]) is not tuple:
        raise CodecError(f"{shape}, got {_describe(obj)}")
    return obj[0], obj[1]


def batch_overhead(sender: str) -> int:
    """An upper bound on encode_batch's bytes beyond the packed messages themselves."""
    return 1 + 1 + len(_packer.pack(sender)) + 5  # kind, outer array, sender, array32 header


# --- frames: authenticated header | payload -------------------------------------------------------------
#
#   length u32 | sender_len u8 | sender | body_tag[16] | header_tag[16] | payload (length bytes)
#
# The header tag covers every header byte before it, the body tag included, so a receiver authenticates
# (sender, length) from at most MAX_HEADER_BYTES before it buffers any payload, and the body tag then binds
# the payload to that header. Layout byte by byte: docs/wire-format.md.

_PREFIX = struct.Struct(">IB")  # length, sender_len
PREFIX_BYTES = _PREFIX.size  # 5
TAG_BYTES = 16
MAX_SENDER_BYTES = 255
MAX_HEADER_BYTES = PREFIX_BYTES + MAX_SENDER_BYTES + 2 * TAG_BYTES  # 292
MAX_FRAME_BYTES = 2**32 - 1  # the length field is 32 bits
_PERSON = b"raft-frame-v2"  # BLAKE2b personalisation of the body tag: a tag made for another purpose never verifies
_HEAD_PERSON = b"raft-head-v2"  # ... and of the header tag


def frame_key(secret: bytes) -> bytes:
    """The MAC key for a cluster secret.

    Keyed BLAKE2b takes keys of at most 64 bytes; a longer secret is first hashed down (with its own
    personalisation), so that any secret length works and every node derives the same key.
    """
    if not secret:
        raise ValueError("the cluster secret must not be empty")
    if len(secret) <= 64:
        return bytes(secret)
    return hashlib.blake2b(secret, digest_size=64, person=b"raft-key-v1").digest()


def frame_tag(payload: bytes | memoryview, key: bytes) -> bytes:
    """The body tag. Keyed BLAKE2b is a PRF by design (no length extension), so it needs no HMAC wrapper."""
    return hashlib.blake2b(payload, key=key, digest_size=TAG_BYTES, person=_PERSON).digest()


def _header_tag(head: bytes | memoryview, key: bytes) -> bytes:
    return hashlib.blake2b(head, key=key, digest_size=TAG_BYTES, person=_HEAD_PERSON).digest()


def sender_bytes(sender: str) -> bytes:
    """The sender id as it goes into a header; ValueError when it is longer than 255 bytes of UTF-8."""
    raw = sender.encode()
    if len(raw) > MAX_SENDER_BYTES:
        raise ValueError(f"node id {sender[:40]!r}... is {len(raw)} bytes of UTF-8; a frame header holds at most 255")
    return raw


def header_bytes(sender: str) -> int:
    """The size of a frame header from `sender`."""
    return PREFIX_BYTES + len(sender_bytes(sender)) + 2 * TAG_BYTES


def frame_header(sender: bytes, payload: bytes, key: bytes) -> bytes:
    """The header that precedes `payload` on the wire; `sender` as returned by sender_bytes()."""
    head = _PREFIX.pack(len(payload), len(sender)) + sender + frame_tag(payload, key)
    return head + _header_tag(head, key)


def verify(tag: bytes, payload: bytes | memoryview, key: bytes) -> bool:
    return hmac.compare_digest(tag, frame_tag(payload, key))  # constant time: no tag-guessing oracle


class FrameReader:
    """Splits a byte stream into authenticated (sender, payload) frames.

    Each header is authenticated before anything else about it is believed: its length decides nothing and no
    payload byte is kept until the header tag verifies, so an unauthenticated peer never makes us hold more
    than one header (MAX_HEADER_BYTES). Then the payload is buffered and checked against the body tag the
    header carried. Every frame of a connection must name the same sender.

    Total work is linear in the bytes fed: data is appended to one bytearray and complete frames are cut off
    its front once per feed(). While a large payload is incomplete, feed() only appends (no re-parsing).
    After a failure `error` is set (and `auth_failed` when a tag did not verify), and the reader returns
    nothing more: the stream is lost.
    """

    def __init__(self, max_frame_bytes: int, key: bytes) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._key = key
        self.error: str | None = None
        self.auth_failed = False
        self.sender: str | None = None  # set by the first authenticated header
        self._buf = bytearray()
        self._need = PREFIX_BYTES  # buffered bytes needed before parsing can make progress
        self._body: tuple[int, bytes] | None = None  # (length, body tag) of the authenticated header in hand

    @property
    def authenticated(self) -> bool:
        """Whether a header has verified on this stream."""
        return self.sender is not None

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        if self.error is not None:
            return []
        buf = self._buf
        buf += data
        if len(buf) < self._need:
            return []
        frames: list[tuple[str, bytes]] = []
        pos, end = 0, len(buf)
        with memoryview(buf) as view:  # slices of a view copy once; a released view lets buf resize again
            while True:
                if self._body is None:
                    if end - pos < PREFIX_BYTES:
                        break
                    length, slen = _PREFIX.unpack_from(view, pos)
                    size = PREFIX_BYTES + slen + 2 * TAG_BYTES
                    if end - pos < size:
                        break
                    if not self._header(view[pos : pos + size], length, slen):
                        break
                    pos += size
                assert self._body is not None
                length, tag = self._body
                if end - pos < length:
                    break
                payload = bytes(view[pos : pos + length])
                if not hmac.compare_digest(tag, frame_tag(payload, self._key)):
                    self._fail("payload failed authentication", auth=True)
                    break
                assert self.sender is not None
                frames.append((self.sender, payload))
                self._body = None
                pos += length
        if self.error is not None:
            buf.clear()
            return frames
        del buf[:pos]  # O(1) amortised: bytearray keeps an offset to its start
        if self._body is not None:
            self._need = self._body[0]
        elif len(buf) < PREFIX_BYTES:
            self._need = PREFIX_BYTES
        else:
            self._need = PREFIX_BYTES + buf[4] + 2 * TAG_BYTES
        return frames

    def _header(self, head: memoryview, length: int, slen: int) -> bool:
        cut = PREFIX_BYTES + slen + TAG_BYTES
        if not hmac.compare_digest(bytes(head[cut:]), _header_tag(head[:cut], self._key)):
            self._fail("frame header failed authentication", auth=True)
            return False
        try:
            sender = bytes(head[PREFIX_BYTES : PREFIX_BYTES + slen]).decode()
        except UnicodeDecodeError:
            self._fail("authenticated header with a sender that is not UTF-8")
            return False
        if self.sender is not None and sender != self.sender:
            self._fail(f"sender changed from {self.sender!r} to {sender!r} on one connection")
            return False
        if length > self.max_frame_bytes:
            self._fail(f"frame of {length} bytes exceeds the limit of {self.max_frame_bytes}")
            return False
        self.sender = sender
        self._body = (length, bytes(head[PREFIX_BYTES + slen : cut]))
        return True

    def _fail(self, why: str, auth: bool = False) -> None:
        self.error = why
        self.auth_failed = auth

    @property
    def buffered(self) -> int:
        return len(self._buf)
