"""HTTP heartbeat load from `wrk` (C, Debian package `wrk`): the load generator of the HTTP rows, cheap enough
not to be the bottleneck on 2 cores. Every answer is checked in wrk's Lua `response` hook (HTTP 200 and
`"code":0`); the summary comes back as one JSON line printed by `done`. Without wrk, `drive` falls back to
the Python client of http_bench (which measures itself as much as the server: the issue saw 1.6-1.9k/s
where wrk sees 4k) and says so in the result (`"generator": "python"`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from typing import Any

from tools import programs

INSTALL_HINT = "install it with `sh tools/setup.sh bench` (Debian package wrk); make test and make bench do"

# One heartbeat per request, broker k % N of this thread's stride (the same body as group.heartbeat_body).
LUA = r"""
local N = %(brokers)d
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  bad = 0
  k = tid * 7919
end
function request()
  k = k + 1
  local i = k %% N
  local body = string.format('{"clusterName":"DefaultCluster","brokerName":"broker-%%d","brokerAddr":"10.1.%%d.%%d:10911","brokerId":%%d,"epoch":1,"maxOffset":%%d,"confirmOffset":%%d,"heartbeatTimeoutMills":10000,"electionPriority":1}',
    math.floor(i / 3), math.floor(i / 250), i %% 250, i %% 3, 1000 + i, 1000 + i)
  return wrk.format("POST", "/api/v1/controller/heartbeat", {["Content-Type"] = "application/json"}, body)
end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"code":0', 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%%d,"duration_us":%%d,"bad":%%d,"socket_errors":%%d,"p50_us":%%d,"p99_us":%%d,"p999_us":%%d,"max_us":%%d}\n',
    summary.requests, summary.duration, b, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
"""


def available() -> bool:
    return programs.which("wrk") is not None


def script(brokers: int, directory: str) -> str:
    path = os.path.join(directory, f"heartbeat-{brokers}.lua")
    with open(path, "w") as f:
        f.write(LUA % {"brokers": max(1, brokers)})
    return path


def _summary(out: str, seconds: float) -> dict[str, Any]:
    for line in out.splitlines():
        if line.startswith("WRKJSON "):
            r = json.loads(line[8:])
            n = r["requests"]
            return {
                "generator": "wrk",
                "requests": n,
                "errors": r["bad"] + r["socket_errors"],
                "per_s": round(n / (r["duration_us"] / 1e6)) if r["duration_us"] else 0,
                "p50_ms": r["p50_us"] / 1000,
                "p99_ms": r["p99_us"] / 1000,
                "p999_ms": r["p999_us"] / 1000,
                "max_ms": r["max_us"] / 1000,
                "seconds": seconds,
            }
    raise RuntimeError(f"wrk printed no summary: {out[-500:]!r}")


def command(http: str, seconds: float, connections: int, brokers: int, directory: str, threads: int = 2) -> list[str]:
    return [
        "wrk",
        f"-t{min(threads, connections)}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "5s",
        "-s",
        script(brokers, directory),
        f"http://{http}",
    ]


def drive(http: str, seconds: float, connections: int = 64, brokers: int = 3000) -> dict[str, Any]:
    """Closed-loop heartbeat load on `http` (host:port) for `seconds`; requests/s, latency percentiles, errors."""
    if not available():
        from tools.bench.http_bench import drive as py_drive

        host, port = http.rsplit(":", 1)
        out = py_drive(host, int(port), seconds, connections, 2, brokers // 2 or 1)
        return {**out, "generator": "python", "note": f"wrk not found: {INSTALL_HINT}"}
    with tempfile.TemporaryDirectory(prefix="wrk-") as d:
        proc = subprocess.run(
            command(http, seconds, connections, brokers, d), capture_output=True, text=True, timeout=seconds + 60
        )
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
    return _summary(proc.stdout, seconds)


class Background:
    """wrk running in the background for at most `seconds` (stopped by `stop()`, or by itself at the end)."""

    def __init__(self, http: str, seconds: float, connections: int = 64, brokers: int = 3000) -> None:
        self.dir = tempfile.mkdtemp(prefix="wrk-")
        self.proc: subprocess.Popen[str] | None = None
        if available():
            self.proc = subprocess.Popen(
                command(http, seconds, connections, brokers, self.dir),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)
