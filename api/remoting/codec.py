"""RocketMQ's RemotingCommand on the wire: frames, and the two header serializations. Layout: docs/remoting.md.

    frame  = total:int32  headerInfo:int32  header:bytes  body:bytes      (big-endian)
    total  = 4 + len(header) + len(body)         (the bytes after the total field)
    headerInfo = serializeType << 24 | len(header)     JSON = 0, ROCKETMQ = 1

The JSON header is fastjson's rendering of RemotingCommand ({"code","language","version","opaque","flag",
"remark","extFields",...}); the ROCKETMQ header is RocketMQSerializable's compact form:

    code:int16 language:int8 version:int16 opaque:int32 flag:int32
    remarkLen:int32 remark:utf8   extLen:int32 {keyLen:int16 key:utf8 valLen:int32 val:utf8}*

A response answers in the serialization of its request (RocketMQ's serializeTypeCurrentRPC).
`FrameError` means the byte stream is broken (the connection must close); `HeaderError` means one frame's
header is unreadable while the stream stays in step (that request can be answered).
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field, replace
from typing import Annotated

import msgspec

from api.service.errors import shown
from api.service.settings import DEFAULT_MAX_FRAME_BYTES
from statemachine.values import JSON as JSONValue
from statemachine.values import JSONObject

JSON = 0
ROCKETMQ = 1
SERIALIZE_NAMES = {JSON: "JSON", ROCKETMQ: "ROCKETMQ"}

RESPONSE_FLAG = 1  # bit 0 of flag: RPC_TYPE (1 = response)
ONEWAY_FLAG = 2  # bit 1 of flag: RPC_ONEWAY

# LanguageCode ordinal <-> name (the ROCKETMQ header carries the code, JSON the name).
LANGUAGES = (
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
    "RUST",
    "NODE_JS",
)
_LANGUAGE_CODE = {name: i for i, name in enumerate(LANGUAGES)}

DEFAULT_MAX_FRAME = DEFAULT_MAX_FRAME_BYTES  # com.rocketmq.remoting.frameMaxLength's default (16 MiB)
MAX_HEADER = 0xFFFFFF  # 24 bits of headerInfo
VERSION = 453  # MQVersion.Version.V5_3_3.ordinal(), what a 5.3.3 node sends

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_PREFIX = struct.Struct(">iI")  # total, headerInfo
_I16 = struct.Struct(">h")
# fastjson's rendering: compact, keys sorted, text as it is: msgspec writes it byte for byte as
# json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True) does, 8x faster (0.5 against
# 4.0 us for a heartbeat's answer header; tests/api/test_remoting_codec.py holds the two to the same bytes).
_JSON_HEADER = msgspec.json.Encoder(order="sorted")
# The general way a JSON header is read (`_decode_json_doc`, for a header `_PlainJsonHeader` does not fit):
# msgspec into a value (1.1 against 5.4 us with json.loads for a broker's 904 header). Whatever it refuses is read
# again by json.loads, which then gives the answer it always gave: its own error (with its position), or a value
# msgspec does not take (a lone surrogate, NaN, a UTF-16 text, a BOM, an integer of thousands of digits), so a
# header decodes to exactly what json.loads makes of it.
_JSON_DECODER = msgspec.json.Decoder()

_Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]


class _PlainJsonHeader(msgspec.Struct, forbid_unknown_fields=True):
    """A JSON header as a Java client writes it: every field of fastjson's RemotingCommand and nothing else, each
    of the type `_decode_json_doc` requires. One msgspec call reads and checks it (`codec.decode` of a broker's
    904 header: 1.65 against 5.1 us the general way); whatever does not fit (an unknown field, a wrong type, an
    extFields number, text msgspec refuses) goes the general way, which gives its value or its precise error
    (tests/api/test_remoting_codec.py holds the two to the same outcome)."""

    code: _Int32
    flag: _Int32 = 0
    version: _Int32 = 0
    opaque: _Int32 = 0
    remark: str | None = None
    language: str = "JAVA"
    extFields: dict[str, str] | None = None
    serializeTypeCurrentRPC: JSONValue = None  # read as json.loads would (msgspec's untyped value), never used


_PLAIN_JSON_HEADER = msgspec.json.Decoder(_PlainJsonHeader)


class FrameError(ValueError):
    """The stream cannot be read further (bad length, frame too large): close the connection."""


class HeaderError(ValueError):
    """One frame's header is malformed; the frame boundary is intact. `opaque` when it could be read."""

    def __init__(self, message: str, opaque: int | None = None, serialize_type: int = JSON) -> None:
        super().__init__(message)
        self.opaque = opaque
        self.serialize_type = serialize_type


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    language: str = "JAVA"
    version: int = VERSION
    serialize_type: int = JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def response(
        self, code: int, remark: str | None = None, ext_fields: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        """The answer to this request: same opaque and serialization, the response flag set."""
        return RemotingCommand(
            code, self.opaque, RESPONSE_FLAG, remark, ext_fields or {}, body, serialize_type=self.serialize_type
        )

    def failed(self, remark: str) -> RemotingCommand:
        """This response replaced by SYSTEM_ERROR (1) with `remark`: same opaque, flag and serialization."""
        return RemotingCommand(1, self.opaque, self.flag, remark, serialize_type=self.serialize_type)


# ------------------------------------------------------------------------------------------------ headers


def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == ROCKETMQ:
        return _rocketmq_header(cmd)
    doc: dict[str, object] = {
        "code": cmd.code,
        "extFields": cmd.ext_fields,
        "flag": cmd.flag,
        "language": cmd.language,
        "opaque": cmd.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    if cmd.remark is not None:
        doc["remark"] = cmd.remark
    return _JSON_HEADER.encode(doc)


def _rocketmq_header(cmd: RemotingCommand) -> bytes:
    remark = cmd.remark.encode() if cmd.remark else b""
    parts = [
        _FIXED.pack(
            cmd.code, _LANGUAGE_CODE.get(cmd.language, _LANGUAGE_CODE["OTHER"]), cmd.version, cmd.opaque, cmd.flag
        ),
        _I32.pack(len(remark)),
        remark,
    ]
    ext: list[bytes] = []
    for k, v in cmd.ext_fields.items():
        if v is None:
            continue
        kb, vb = k.encode(), v.encode()
        ext += (_I16.pack(len(kb)), kb, _I32.pack(len(vb)), vb)
    blob = b"".join(ext)
    parts += (_I32.pack(len(blob)), blob)
    return b"".join(parts)


def decode_header(data: bytes, serialize_type: int) -> RemotingCommand:
    if serialize_type == ROCKETMQ:
        return _decode_rocketmq(data)
    if serialize_type != JSON:
        raise HeaderError(f"unknown header serialization type {serialize_type} (0 = JSON, 1 = ROCKETMQ)")
    return _decode_json(data)


def _int_field(doc: dict, name: str, default: int | None, bits: int, opaque: int | None) -> int:
    v = doc.get(name, default)
    if v is None or type(v) is not int or not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
        raise HeaderError(f"JSON header: {name!r} must be a {bits}-bit integer, got {shown(v)}", opaque, JSON)
    return v


def loads_header(data: bytes) -> JSONValue:
    """A JSON header's value, exactly as json.loads gives it (or its error), read by msgspec when it can."""
    try:
        return _JSON_DECODER.decode(data)
    except (ValueError, RecursionError):  # msgspec.DecodeError and UnicodeDecodeError are ValueErrors
        return json.loads(data)


def _decode_json(data: bytes) -> RemotingCommand:
    try:
        h = _PLAIN_JSON_HEADER.decode(data)
    except (ValueError, RecursionError):  # msgspec's DecodeError and ValidationError, UnicodeDecodeError
        return _decode_json_doc(data)  # a lone surrogate included: msgspec refuses one, escaped or not
    return RemotingCommand(h.code, h.opaque, h.flag, h.remark, h.extFields or {}, None, h.language, h.version, JSON)


def _decode_json_doc(data: bytes) -> RemotingCommand:
    """A JSON header read as json.loads reads it, each field checked with a message naming it."""
    try:
        doc = loads_header(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise HeaderError(f"JSON header is not valid JSON: {e}") from None
    except RecursionError:
        raise HeaderError("JSON header is not valid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise HeaderError(f"JSON header must be an object, got {type(doc).__name__}")
    raw_opaque = doc.get("opaque", 0)
    opaque = raw_opaque if type(raw_opaque) is int and -(2**31) <= raw_opaque < 2**31 else None
    code = _int_field(doc, "code", None, 32, opaque)
    flag = _int_field(doc, "flag", 0, 32, opaque)
    version = _int_field(doc, "version", 0, 32, opaque)
    opaque = _int_field(doc, "opaque", 0, 32, opaque)
    remark = doc.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise HeaderError(f"JSON header: 'remark' must be a string, got {shown(remark)}", opaque)
    language = doc.get("language", "JAVA")
    if not isinstance(language, str):
        raise HeaderError(f"JSON header: 'language' must be a string, got {shown(language)}", opaque)
    ext = doc.get("extFields") or {}
    if not isinstance(ext, dict):
        raise HeaderError(f"JSON header: 'extFields' must be an object, got {shown(ext)}", opaque)
    fields: dict[str, str] = ext  # a Java client's: every value a string, the dict taken as it is
    for v in ext.values():
        if type(v) is not str:
            fields = _ext_text(ext, opaque)
            break
    if b"\\u" in data:  # a \uXXXX escape may be half a surrogate pair: text no UTF-8 answer could carry
        for what, text in (
            ("remark", remark),
            ("language", language),
            *((f"extFields[{shown(k)}]", v) for k, v in fields.items()),
            *((f"extFields key {shown(k)}", k) for k in fields),
        ):
            if text is not None and not _utf8_ok(text):
                raise HeaderError(f"JSON header: {what} holds a lone surrogate (not Unicode text)", opaque)
    return RemotingCommand(code, opaque, flag, remark, fields, None, language, version, JSON)


def _ext_text(ext: JSONObject, opaque: int) -> dict[str, str]:
    """extFields as fastjson reads a HashMap<String,String>: nulls left out, scalars become their text."""
    fields: dict[str, str] = {}
    for k, v in ext.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, int | float):
            v = str(v)
        elif not isinstance(v, str):
            raise HeaderError(f"JSON header: extFields[{shown(k)}] must be a string, got {shown(v)}", opaque)
        fields[k] = v
    return fields


def _utf8_ok(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _decode_rocketmq(data: bytes) -> RemotingCommand:
    n = len(data)
    if n < _FIXED.size:
        raise HeaderError(f"ROCKETMQ header is {n} bytes, shorter than its fixed {_FIXED.size}", None, ROCKETMQ)
    code, lang, version, opaque, flag = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size

    def fail(what: str) -> HeaderError:
        return HeaderError(f"ROCKETMQ header: {what} at byte {pos}", opaque, ROCKETMQ)

    def take(length: int, what: str) -> bytes:
        nonlocal pos
        if length < 0 or pos + length > n:
            raise fail(f"{what} length {length} runs past the header's {n} bytes")
        out = data[pos : pos + length]
        pos += length
        return out

    def text(raw: bytes, what: str) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise fail(f"{what} is not UTF-8") from None

    (remark_len,) = _I32.unpack(take(4, "remark length field"))
    remark = text(take(remark_len, "remark"), "remark") if remark_len > 0 else None
    (ext_len,) = _I32.unpack(take(4, "extFields length field"))
    ext_end = pos + ext_len
    if ext_len < 0 or ext_end > n:
        raise fail(f"extFields length {ext_len} runs past the header's {n} bytes")
    fields: dict[str, str] = {}
    while pos < ext_end:
        (klen,) = _I16.unpack(take(2, "extFields key length field"))
        key = text(take(klen, "extFields key"), "extFields key")
        (vlen,) = _I32.unpack(take(4, f"extFields[{key!r}] length field"))
        fields[key] = text(take(vlen, f"extFields[{key!r}]"), f"extFields[{key!r}]")
        if pos > ext_end:
            raise fail("an extFields entry runs past extFields")
    language = LANGUAGES[lang] if 0 <= lang < len(LANGUAGES) else "OTHER"
    return RemotingCommand(code, opaque, flag, remark, fields, None, language, version, ROCKETMQ)


# ------------------------------------------------------------------------------------------------- frames


def encode(cmd: RemotingCommand) -> bytes:
    header = encode_header(cmd)
    if len(header) > MAX_HEADER:
        raise ValueError(f"header of {len(header)} bytes does not fit 24 bits")
    body = cmd.body or b""
    return _PREFIX.pack(4 + len(header) + len(body), cmd.serialize_type << 24 | len(header)) + header + body


class AnswerTemplate:
    """The frames of one answer to many requests that differ only in their opaque (a committed entry's answer
    to every heartbeat it carried): the header rendered once, each frame the bytes around the opaque joined
    with its digits. `frame(opaque)` is `encode(answer)` with that opaque, byte for byte (a test holds them
    equal), at a third of its cost. JSON headers only: `of` gives None for another serialization or a header
    that does not encode, and the caller encodes each answer itself."""

    __slots__ = ("_head", "_tail", "_body")
    _OPAQUE = b'"opaque":0,'  # sorted keys: between "language" and "serializeTypeCurrentRPC", once

    def __init__(self, head: bytes, tail: bytes, body: bytes) -> None:
        self._head, self._tail, self._body = head, tail, body

    @classmethod
    def of(cls, answer: RemotingCommand) -> AnswerTemplate | None:
        if answer.serialize_type != JSON:
            return None
        try:
            header = encode_header(replace(answer, opaque=0))
        except ValueError:
            return None
        # a quote inside a remark or a field is escaped: the opaque's key is found once, as the key itself
        head, found, tail = header.partition(cls._OPAQUE)
        if not found or cls._OPAQUE in tail:
            return None
        return cls(head + cls._OPAQUE[:-2], b"," + tail, answer.body or b"")

    def frame(self, opaque: int) -> bytes:
        header = b"%b%d%b" % (self._head, opaque, self._tail)
        if len(header) > MAX_HEADER:  # JSON is serialization 0: headerInfo is the header's length alone
            raise ValueError(f"header of {len(header)} bytes does not fit 24 bits")
        return _PREFIX.pack(4 + len(header) + len(self._body), len(header)) + header + self._body


class FrameDecoder:
    """Splits a byte stream into frames (NettyDecoder's job). `feed(data)` returns the complete frames as
    (serializeType, header bytes, body bytes); FrameError once the stream is broken."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes, bytes]]:
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            (total,) = _I32.unpack_from(buf, pos)
            if total < 4:
                raise FrameError(f"frame length {total} at stream byte {pos} is below the 4 bytes of its header length")
            if total > self.max_frame:
                raise FrameError(f"frame length {total} exceeds the maximum of {self.max_frame} bytes")
            if n - pos - 4 < total:
                break
            (info,) = _U32.unpack_from(buf, pos + 4)
            header_len = info & MAX_HEADER
            if header_len > total - 4:
                raise FrameError(f"header length {header_len} exceeds the frame's {total - 4} bytes after it")
            start = pos + 8
            frames.append(
                (info >> 24, bytes(buf[start : start + header_len]), bytes(buf[start + header_len : pos + 4 + total]))
            )
            pos += 4 + total
        if pos:
            del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        return len(self._buf)

    def head(self, n: int) -> bytes:
        """The first `n` bytes not yet returned as frames (to say what a broken stream held)."""
        return bytes(self._buf[:n])


_HTTP_REQUEST = re.compile(rb"(GET|HEAD|POST|PUT|DELETE|PATCH|OPTIONS) (/[\x21-\x7e]*)?")


def http_request_target(head: bytes) -> str | None:
    """The request target when a stream starts with an HTTP request line ("/" when it is not complete yet),
    else None. As a frame length, each method's first four bytes are above 1 GiB, so no RocketMQ frame can
    start this way (the maximum frame size is at most 1 GiB)."""
    m = _HTTP_REQUEST.match(head)
    if m is None:
        return None
    return (m.group(2) or b"/").decode("ascii") if head[m.end() : m.end() + 1] in (b" ", b"\r") else "/"


def decode(frame: tuple[int, bytes, bytes]) -> RemotingCommand:
    """One frame from FrameDecoder as a command (HeaderError when its header is malformed)."""
    stype, header, body = frame
    cmd = decode_header(header, stype)
    cmd.body = body or None
    return cmd


# fastjson writes a Map<Long, String> with bare numeric keys (`{1:"127.0.0.1:10911"}`, not JSON: the NameServer's
# ClusterInfo brokerAddrs, for one); it reads both forms.
_BARE_KEY = re.compile(r'([{,])(-?\d+):(?=["{\[0-9tfn-])')


def loads_fastjson(raw: bytes) -> object:
    """A JSON body as fastjson writes it: plain JSON, or JSON but for bare numeric map keys. Raises ValueError
    (json.JSONDecodeError, with the position in the body) when it is neither."""
    text = raw.decode()
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(_BARE_KEY.sub(r'\1"\2":', text))
