"""The fixture of the benchmarks' smoke tests (tools/bench: `python -m tools.bench SECTION`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

RunBench = Callable[..., tuple[subprocess.CompletedProcess[str], dict[str, Any]]]


@pytest.fixture
def run_bench(tmp_path: Path) -> RunBench:
    """`run_bench(section, *args, timeout=S)`: `python -m tools.bench SECTION ARGS --json FILE` in `tmp_path`
    (where a benchmark's default outputs land too); asserts exit 0 and returns (process, the JSON report).
    Benchmarks are not tests: the smoke tests built on this check a benchmark runs on tiny input, no timing."""

    def run(section: str, *args: str, timeout: float) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        out = tmp_path / f"{section}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "tools.bench", section, *args, "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        return proc, json.loads(out.read_text())

    return run
