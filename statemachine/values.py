"""Names for the values that really are arbitrary, so that wherever `Any` stands in statemachine/, api/ and cli/
it says why (issue 26). Everything else is typed."""

from __future__ import annotations

from typing import Any

JSON = Any
"""Any JSON value: what `json.loads` returns and `json.dumps` takes (a Result's body, an HTTP answer, a config
document). A reader narrows it where it needs a shape."""

JSONObject = dict[str, JSON]
"""A JSON object: a Result's header and body, a `to_json` document, an HTTP or log document."""

Unpacked = Any
"""What `msgpack.unpackb` returns from bytes not yet checked (a log entry, a snapshot section, a row of one): the
checks (`commands.check`, statemachine/_body.py) narrow it; a checked command is its typed tuple."""

Cell = Any
"""A cell of a row kept as a mutable list in its snapshot layout (the live table's LiveRow): its column says its
type; a list, not a tuple, so that a heartbeat updates it in place and a snapshot packs it as it is."""

DataclassField = Any
"""What `dataclasses.field(...)` returns: typeshed types it Any so that it stands as any field's default; our
helpers that wrap it (a setting's declaration, a request header field) return the same."""

TypeForm = Any
"""An annotation used as a value (`list[int]`, `str | None`), or pydantic's field definition built of one (the pair
(annotation, FieldInfo)), as `create_model` takes them; typing has no type for these."""
