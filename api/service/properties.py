"""`java.util.Properties.load`'s text syntax, for controller.conf (cli/config.py) and the properties text
brokers and mqadmin send (RocketMQ remoting's UPDATE_CONTROLLER_CONFIG body, api/remoting/server.py).

`key=value`, `key: value` or `key value`; `#` and `!` comment lines; blank lines; a line ending in an odd
number of backslashes continues on the next line (leading whitespace of the continuation dropped); escapes
`\\t \\n \\r \\f \\uXXXX` and backslash-anything for that character. An XML `<!-- ... -->` block (RocketMQ's
namesrv samples start with one) is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass


class PropertiesError(ValueError):
    """Text that is not properties syntax: `str()` is `path:line: reason`."""

    def __init__(self, reason: str, path: str, line: int) -> None:
        self.reason, self.path, self.line = reason, path, line
        super().__init__(f"{path}:{line}: {reason}")


@dataclass(frozen=True, slots=True)
class Property:
    key: str
    value: str
    line: int
    """1-based physical line on which the (possibly continued) logical line starts."""


_SEPARATORS = "=:"
_WS = " \t\f"


def parse_properties(text: str, path: str = "<string>") -> list[Property]:
    """Every key/value of a .properties text in file order (duplicates kept; the last one wins when bound)."""
    out: list[Property] = []
    lines = text.splitlines()
    i, n = 0, len(lines)
    while i < n:
        start = i + 1
        raw = lines[i].lstrip(_WS)
        i += 1
        if not raw or raw[0] in "#!":
            continue  # comment lines never continue, even when they end in a backslash
        if raw.startswith("<!--"):
            # XML licence block of RocketMQ's samples; Java would bind junk keys from it, we skip it.
            while "-->" not in raw:
                if i >= n:
                    raise PropertiesError("unterminated XML comment <!-- (no closing -->)", path, start)
                raw = lines[i]
                i += 1
            continue
        logical = raw
        while _continues(logical):
            logical = logical[:-1]
            if i >= n:
                break  # Java drops a trailing backslash at end of file
            logical += lines[i].lstrip(_WS)
            i += 1
        out.append(_split_entry(logical, path, start))
    return out


def _continues(s: str) -> bool:
    k = len(s) - len(s.rstrip("\\"))
    return k % 2 == 1


def _split_entry(s: str, path: str, line: int) -> Property:
    j, n = 0, len(s)
    while j < n and s[j] not in _SEPARATORS and s[j] not in _WS:
        j += 2 if s[j] == "\\" else 1
    j = min(j, n)
    raw_key, k = s[:j], j
    while k < n and s[k] in _WS:
        k += 1
    if k < n and s[k] in _SEPARATORS:
        k += 1
        while k < n and s[k] in _WS:
            k += 1
    raw_value = _rstrip_unescaped(s[k:])
    key = _unescape(raw_key, path, line, "key")
    value = _unescape(raw_value, path, line, f"value of {key}")
    return Property(key, value, line)


def _rstrip_unescaped(s: str) -> str:
    while s and s[-1] in _WS + "\r":
        backslashes = len(s[:-1]) - len(s[:-1].rstrip("\\"))
        if backslashes % 2 == 1:
            break  # an escaped space is part of the value
        s = s[:-1]
    return s


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str, path: str, line: int, what: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    j, n = 0, len(s)
    while j < n:
        c = s[j]
        if c != "\\":
            out.append(c)
            j += 1
            continue
        if j + 1 >= n:
            j += 1  # lone trailing backslash: Java drops it
            continue
        e = s[j + 1]
        if e == "u":
            hexdigits = s[j + 2 : j + 6]
            if len(hexdigits) != 4 or not all(h in "0123456789abcdefABCDEF" for h in hexdigits):
                raise PropertiesError(
                    f"malformed \\uXXXX escape {s[j : j + 6]!r} in {what}: four hex digits required", path, line
                )
            out.append(chr(int(hexdigits, 16)))
            j += 6
        else:
            out.append(_ESCAPES.get(e, e))
            j += 2
    return "".join(out)
