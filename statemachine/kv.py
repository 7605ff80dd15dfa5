"""KvConfigManager: namespaced string key/value config, like the NameServer's KV config, replicated.

Answers follow docs http-api.md: reads answer {"value"} or 22 QUERY_NOT_FOUND with the NameServer's
remark; delete answers {"deleted"}; compare-and-set answers {"succeeded", "value": the value after}.
"""

from __future__ import annotations

from statemachine import _body as B
from statemachine.codes import QUERY_NOT_FOUND, SUCCESS
from statemachine.result import Result
from statemachine.sections import SECTION_KV_CONFIG
from statemachine.values import JSONObject


class KvConfigManager:
    """namespace -> key -> value. Empty namespaces are dropped, so equal content means equal bytes.
    A SnapshotAbleMetadataManager."""

    def __init__(self) -> None:
        self.table: dict[str, dict[str, str]] = {}

    def get_value(self, namespace: str, key: str) -> str | None:
        ns = self.table.get(namespace)
        return None if ns is None else ns.get(key)

    def _set(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value

    def put(self, namespace: str, key: str, value: str) -> Result:
        self._set(namespace, key, value)
        return Result(SUCCESS, body={"value": value})

    def get(self, namespace: str, key: str) -> Result:
        value = self.get_value(namespace, key)
        if value is None:
            return Result(QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}")
        return Result(SUCCESS, body={"value": value})

    def delete(self, namespace: str, key: str) -> Result:
        ns = self.table.get(namespace)
        deleted = ns is not None and ns.pop(key, None) is not None
        if ns is not None and not ns:
            del self.table[namespace]
        return Result(SUCCESS, body={"deleted": deleted})

    def cas(self, namespace: str, key: str, expect: str | None, value: str) -> Result:
        """Set `value` only if the current value is `expect` (None: only if the key is absent)."""
        current = self.get_value(namespace, key)
        if current != expect:
            return Result(SUCCESS, body={"succeeded": False, "value": current})
        self._set(namespace, key, value)
        return Result(SUCCESS, body={"succeeded": True, "value": value})

    # --- snapshot ---------------------------------------------------------------------------------------

    def section_type(self) -> int:
        return SECTION_KV_CONFIG

    def encode_snapshot(self) -> bytes:
        t = self.table
        rows = [[ns, [[k, t[ns][k]] for k in sorted(t[ns])]] for ns in sorted(t)]
        return B.pack(rows)

    def load_snapshot(self, body: bytes) -> None:
        (rows,) = B.unpack(SECTION_KV_CONFIG, body, 1)
        table: dict[str, dict[str, str]] = {}
        for ns, pairs in B.rows(rows, 2, "kvConfig"):
            B.check(B.is_str(ns), "kvConfig: namespace {!r} is not a string", ns)
            entries = B.rows(pairs, 2, "kvConfig {!r}", ns)
            B.check(bool(entries), "kvConfig {!r}: empty namespace", ns)
            B.check(all(B.is_str(k) and B.is_str(v) for k, v in entries), "kvConfig {!r}: non-string entry", ns)
            B.ascending([k for k, _ in entries], "kvConfig {!r} keys", ns)
            table[ns] = {k: v for k, v in entries}
        B.ascending([r[0] for r in rows], "kvConfig namespaces")
        self.table = table

    def to_json(self) -> JSONObject:
        return {ns: {k: self.table[ns][k] for k in sorted(self.table[ns])} for ns in sorted(self.table)}
