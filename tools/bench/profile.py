"""py-spy over one process for the length of a measured window, and where its samples went.

`record(pid, path)` runs `py-spy record --nonblocking -f raw` on `pid` while the `with` block runs (the window),
stops it with SIGINT at the block's end, and leaves py-spy's raw folded stacks in `path`: one line per distinct
stack, `frame;frame;...;frame COUNT`, outermost frame first, each frame `function (file:line)`. Only threads on
a CPU are sampled (no `--idle`), so the shares are of the process's busy time. `--nonblocking` reads the
process without stopping it, so the window's figures stay the process's own.

A sample of a thread in native code only has an empty stack (` COUNT`), counted as `(no Python frame)`.

`top(paths)` adds up such files: for each function (`function (file)`, lines merged), its self share (samples
where it is the innermost frame) and its inclusive share (samples where it is anywhere on the stack), of all
samples.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

NATIVE = "(no Python frame)"  # py-spy's empty stack: a thread busy in native code only (a C library, the GC)
RATE = 200  # samples a second: enough for a 10 s window, light enough not to move the process's figures


def available() -> str | None:
    """The py-spy program beside this interpreter, or None. It comes from the venv (`pip install -e '.[bench]'`,
    which `make setup` runs), not from the machine: tools/programs.py's table is for programs outside the venv."""
    exe = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return exe if os.access(exe, os.X_OK) else None


@contextlib.contextmanager
def record(pid: int, path: str, rate: int = RATE, start_timeout: float = 30.0) -> Iterator[None]:
    """The window starts only once py-spy catches SIGINT: a SIGINT before its handler is set kills it without a
    file, which a short window on a busy machine did in CI. Its "Sampling process" line comes before that."""
    exe = available()
    if exe is None:
        raise RuntimeError("py-spy is not installed: pip install -e '.[bench]'")
    argv = [exe, "record", "--nonblocking", "-r", str(rate), "-f", "raw", "-o", path, "--pid", str(pid)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout
    assert output is not None
    said: list[str] = []
    drain = threading.Thread(target=lambda: said.append(output.read()), daemon=True)  # a full pipe would stall it
    drain.start()
    deadline = time.monotonic() + start_timeout
    while not _catches_sigint(proc.pid):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            drain.join(timeout=5)
            error = "".join(said).strip()[:500]  # py-spy's error comes first, a backtrace may follow
            raise RuntimeError(f"py-spy on pid {pid} did not start sampling in {start_timeout:g} s: {error}")
        time.sleep(0.005)  # polling py-spy's signal mask, not waiting for time to pass
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes what it has sampled, then ends
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drain.join(timeout=5)
    if proc.returncode != 0 or not os.path.exists(path):
        raise RuntimeError(
            f"py-spy on pid {pid} ended with {proc.returncode}, no {path}: {''.join(said).strip()[-500:]}"
        )


def _catches_sigint(pid: int) -> bool:
    """Whether process `pid` has a SIGINT handler: the SigCgt mask in /proc/PID/status, bit SIGINT - 1."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(line.split()[1] for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(int(mask, 16) >> (signal.SIGINT - 1) & 1)


def _function(frame: str) -> str:
    """`name (file:line)` → `name (file)`; a frame without a location stays as it is."""
    name, sep, where = frame.rpartition(" (")
    if not sep:
        return frame
    return f"{name} ({where.rstrip(')').rsplit(':', 1)[0]})"


def stacks(lines: Iterable[str]) -> Iterator[tuple[list[str], int]]:
    """(frames outermost first, count) for each line of py-spy's raw format; ValueError names a bad line."""
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, sep, count = line.rpartition(" ")
        if not sep or not count.isdigit():
            raise ValueError(f"line {n}: not 'frame;...;frame COUNT': {line[:120]!r}")
        yield (stack.split(";") if stack else [NATIVE]), int(count)


def top(paths: Iterable[str], n: int = 15) -> dict[str, Any]:
    """The `n` functions with the most self samples and the `n` with the most inclusive samples, over every
    file in `paths`: {"samples", "self": [[share %, function]...], "inclusive": [...]}."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for path in paths:
        with open(path) as f:
            for frames, count in stacks(f):
                functions = [_function(fr) for fr in frames]
                total += count
                own[functions[-1]] += count
                for fn in set(functions):
                    anywhere[fn] += count

    def shares(c: Counter[str]) -> list[list[Any]]:
        return [[round(100 * k / total, 1), fn] for fn, k in c.most_common(n)] if total else []

    return {"samples": total, "self": shares(own), "inclusive": shares(anywhere)}
