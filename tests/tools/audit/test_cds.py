"""The audit's class-data archive (tools/audit/cds.py): a local JVM started by `session()` maps the archive that
`RMQ_AUDIT_CDS_ARCHIVE` names, and a damaged one (cut short, or a byte flipped) is not used, silently, the session
unharmed (before the size check, a short archive killed the JVM with SIGBUS)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.audit import cds

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
# A local session, the JVM's own view of its memory maps, and one job.
PROBE = """
import os
from tools.audit.job import session
spark = session("local[1]", "ERROR", spark_ui_enabled="false", spark_ui_showConsoleProgress="false")
pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
with open(f"/proc/{pid}/maps") as f:
    mapped = os.environ["RMQ_AUDIT_CDS_ARCHIVE"] in f.read()
print("mapped" if mapped else "not mapped", spark.range(10).count())
spark.stop()
"""


def probe(archive: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT")}
    env[cds.ENV] = str(archive)
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def test_the_local_jvm_maps_the_archive_and_never_a_damaged_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = cds.build(cds.DIR)  # make audit-env built it already; cached
    assert archive == cds.archive(cds.DIR) and cds.build(archive.parent) == archive
    r = probe(archive)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "mapped 10", r.stdout[-2000:] + r.stderr[-3000:]

    # Shorter than built (JDK 17 would die of SIGBUS mapping it): not given to the JVM at all.
    short = tmp_path / "short" / archive.name
    short.parent.mkdir()
    short.write_bytes(archive.read_bytes()[: 1 << 20])
    (short.parent / f"{archive.name}.bytes").write_text(str(archive.stat().st_size))
    assert not cds.whole(short) and cds.whole(archive)
    monkeypatch.setenv(cds.ENV, str(short))
    assert cds.options() == ""  # so no JVM is given it: each starts as one without an archive
    # Whole but for one flipped byte in its middle: the JVM's own check (-XX:+VerifySharedSpaces) refuses it.
    flipped = tmp_path / "flipped" / archive.name
    flipped.parent.mkdir()
    raw = bytearray(archive.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    flipped.write_bytes(bytes(raw))
    (flipped.parent / f"{archive.name}.bytes").write_text(str(len(raw)))
    r = probe(flipped)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "not mapped 10", out[-3000:]
    assert "cds" not in out.lower() and "sharedarchive" not in out.lower(), out[-3000:]  # and said nothing
