"""Fixtures of the rmqctl tests (plain helpers in helpers.py, offline data directories in
tests/testdata/rmqctl_fixtures.py)."""

from __future__ import annotations

import httpx
import pytest

from cli.rmqctl import client as client_module
from cli.rmqctl.client import Hooks
from tests.cli.helpers import FakeTime, Handler, Serve


@pytest.fixture
def serve_rmqctl(monkeypatch: pytest.MonkeyPatch) -> Serve:
    """`serve_rmqctl(handler, clock)` answers every request of rmqctl's HTTP client with `handler` (an
    httpx.MockTransport handler: nothing listens) and gives the client `clock`, whose sleeps pass at once."""

    def install(handler: Handler, clock: FakeTime) -> FakeTime:
        hooks = Hooks(transport=httpx.MockTransport(handler), clock=clock.clock, sleep=clock.sleep)
        monkeypatch.setattr(client_module, "HOOKS", hooks)
        return clock

    return install
