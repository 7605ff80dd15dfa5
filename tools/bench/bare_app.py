"""The baseline of `python -m tools.bench http`: the heartbeat request model parsed by FastAPI, answered with a
constant envelope, nothing else. Same server stack as controllerd (uvicorn, httptools, uvloop when
installed, access log off). Usage: python -m tools.bench.bare_app PORT [--lean]

With --lean, the controller's lean heartbeat path (api/http/hotpath.py: its parse with the controller's
request model, its one-write answer) is put in front, answering the same constant: what the controller's
HTTP front end costs without consensus, the peer of its lean path (docs/performance.md)."""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.types import Scope

from api.http.hotpath import LeanHeartbeat
from api.service.settings import DEFAULT_MAX_BODY_BYTES


class Heartbeat(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    clusterName: str  # noqa: N815 - RocketMQ's field names
    brokerName: str  # noqa: N815
    brokerAddr: str  # noqa: N815
    brokerId: int  # noqa: N815
    epoch: int = -1
    maxOffset: int = -1  # noqa: N815
    confirmOffset: int = -1  # noqa: N815
    heartbeatTimeoutMills: int = 10000  # noqa: N815
    electionPriority: int = 2**31 - 1  # noqa: N815


app = FastAPI()
OK = {"code": 0, "codeName": "SUCCESS", "remark": "Heart beat success", "header": None, "body": None}


@app.post("/api/v1/controller/heartbeat")
async def heartbeat(hb: Heartbeat) -> dict[str, object]:
    return OK


class BareLean(LeanHeartbeat):
    """The lean path answering the constant envelope (no consensus)."""

    response = JSONResponse(OK)

    async def answer(self, scope: Scope, fields: dict[str, Any]) -> JSONResponse:
        return self.response


@app.get("/livez")
async def livez() -> dict[str, str]:
    return {"status": "ok"}


if __name__ == "__main__":
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    served = BareLean(app, DEFAULT_MAX_BODY_BYTES) if "--lean" in sys.argv[2:] else app
    uvicorn.run(
        served,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        http="httptools",
        loop=loop,
        access_log=False,
        log_level="warning",
    )
