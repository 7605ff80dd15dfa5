"""Fixtures of the API tests (helpers in harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.api.harness import Counter, Node, solo


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def node(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Node]:
    """A one-node group shared by a module's tests (each test uses its own broker names and KV keys)."""
    async with solo(tmp_path_factory.mktemp("solo")) as n:
        yield n


@pytest.fixture(scope="session")
def unique() -> Counter:
    return Counter()
