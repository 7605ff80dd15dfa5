"""The OpenAPI document, pinned: /openapi.json is part of the HTTP API's contract (clients are generated from it),
and most request models are generated from the typed requests (api/service/requests.py), so a change there
shows here. A deliberate change: regenerate with `UPDATE_OPENAPI=1 pytest tests/api/test_openapi.py` and
review the diff of tests/testdata/openapi.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.api.test_fuzz import served_schema

PINNED = Path(__file__).resolve().parent.parent / "testdata" / "openapi.json"


def test_the_openapi_document_is_the_pinned_one() -> None:
    served = json.dumps(served_schema(), indent=1)
    if os.environ.get("UPDATE_OPENAPI"):
        PINNED.write_text(served)
    assert served == PINNED.read_text()
