"""Helpers shared by the rmqctl tests (the fixtures built on them are in conftest.py): the CLI runner, the
http-api.md envelope, the fake group's HTTP addresses and the client's fake clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from click.testing import CliRunner, Result

from cli.rmqctl import main
from statemachine.codes import code_name

L, F1, F2 = "127.0.0.1:9770", "127.0.0.1:9771", "127.0.0.1:9772"  # leader, followers (HTTP addresses)


def rmqctl(*args: Any, env: dict[str, str | None] | None = None, columns: int = 120) -> Result:
    """Run rmqctl in-process, no colour, `columns` wide, with none of its RMQCTL_* settings from the
    environment the tests run in."""
    base: dict[str, str | None] = {
        "COLUMNS": str(columns),
        "NO_COLOR": "1",
        "RMQCTL_ADDRESS": None,
        "RMQCTL_TOKEN": None,
        "RMQCTL_TIMEOUT": None,
    }
    return CliRunner().invoke(main, [str(a) for a in args], env={**base, **(env or {})}, catch_exceptions=False)


def envelope(code: int = 0, header: Any = None, body: Any = None, remark: str | None = None) -> dict[str, Any]:
    return {"code": code, "codeName": code_name(code), "remark": remark, "header": header, "body": body}


@dataclass
class FakeTime:
    """The client's clock; its sleep advances it, so deadlines pass without waiting."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


Handler = Callable[[httpx.Request], httpx.Response]
Serve = Callable[[Handler, FakeTime], FakeTime]  # the serve_rmqctl fixture (conftest.py)
