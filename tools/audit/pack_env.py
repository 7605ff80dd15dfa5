"""The executors' Python environment, packed for `--archives` (docs/audit.md, On a cluster).

    python -m tools.audit.pack_env OUT.tar.gz

A fresh venv (this interpreter's base Python) with the project's runtime dependencies pinned in
pyproject.toml, and neither PySpark (each executor takes it from its Spark installation) nor the project's
code (the audit ships that itself with addPyFile), packed with venv-pack (pinned in the dev extra). Executors
unpack it into their working directory: spark-submit --archives OUT.tar.gz#env with PYSPARK_PYTHON=./env/bin/python.
venv-pack keeps the venv's link to its base interpreter: the executors' hosts need that Python (3.11) at the same
path (`base_python()`); docs/audit.md says what to do when they do not.

Cached: OUT is rebuilt only when pyproject.toml is newer. make test builds it before the suite (make audit-env).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
VENV_PACK = Path(sys.executable).parent / "venv-pack"


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The runtime dependencies, as pinned (what executors import: msgpack, lz4, google-crc32c, click...)."""
    with open(pyproject, "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def base_python() -> str:
    """The interpreter a venv of this one is made from (the venv's own python is a link to it)."""
    return str(getattr(sys, "_base_executable", sys.executable))


def build(out: Path) -> Path:
    if out.exists() and out.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime:
        return out
    if not VENV_PACK.exists():
        raise SystemExit(f"pack_env: {VENV_PACK} missing: make setup installs venv-pack (the dev extra)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rmq-audit-env-") as tmp:
        env = Path(tmp) / "env"
        subprocess.run([base_python(), "-m", "venv", str(env)], check=True, timeout=300)
        subprocess.run(
            [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements()],
            check=True,
            timeout=600,
        )
        packed = Path(tmp) / "env.tar.gz"
        subprocess.run([str(VENV_PACK), "-q", "-p", str(env), "-o", str(packed)], check=True, timeout=600)
        shutil.move(str(packed), str(out) + ".tmp")
        os.replace(str(out) + ".tmp", out)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = build(Path(argv[0]).resolve())
    print(f"pack_env: {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
