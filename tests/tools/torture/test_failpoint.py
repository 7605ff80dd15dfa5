"""The failpoint mechanism: parsing, hit counting, and what each action does to the code it sits in."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import pytest

from raft.core.messages import Entry, HardState
from raft.leaf import failpoint
from raft.storage import FileMetaStorage, SegmentLog
from raft.storage.wal import LogStorageFailedError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(autouse=True)
def _disarm():
    yield
    failpoint.reset()


def test_off_by_default_and_parse_errors_name_the_term():
    assert failpoint.armed() == []
    with pytest.raises(ValueError, match="unknown failpoint 'wal.nope'"):
        failpoint.parse("wal.nope=crash")
    with pytest.raises(ValueError, match="cannot parse 'wal.fsync=explode'"):
        failpoint.parse("wal.fsync=explode")
    with pytest.raises(ValueError, match="'EWHAT' in"):
        failpoint.parse("wal.fsync=error(EWHAT)")
    with pytest.raises(ValueError, match="hit counts start at 1"):
        failpoint.parse("wal.fsync=crash@0")
    points = failpoint.parse(" wal.fsync=delay(5) ; meta.save=error(EIO)@3+;snapshot.before_rename=crash@2")
    assert sorted(points) == ["meta.save", "snapshot.before_rename", "wal.fsync"]


def test_every_point_in_the_catalogue_is_placed_in_the_code():
    sources = ""
    for d in ("raft", "snapshot"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, d)):
            for f in files:
                if f.endswith(".py") and f != "failpoint.py":
                    with open(os.path.join(dirpath, f)) as fh:
                        sources += fh.read()
    steps = (
        "before_fsync",
        "before_meta",
        "before_dir_fsync",
        "before_rename",
        "after_rename",
        "before_reap",
        "during_reap",
    )
    for name in failpoint.POINTS:
        if name.startswith("snapshot."):
            assert name.removeprefix("snapshot.") in steps
            continue
        assert f'failpoint.hit("{name}")' in sources, name


def test_error_on_the_nth_hit_only_or_from_it_on():
    failpoint.configure("meta.save=error(EIO)@2")
    failpoint.hit("meta.save")
    with pytest.raises(OSError) as e:
        failpoint.hit("meta.save")
    assert e.value.errno == errno.EIO and "failpoint meta.save" in str(e.value)
    failpoint.hit("meta.save")  # @2 without + fires once
    failpoint.configure("meta.save=error(ENOSPC)@2+")
    failpoint.hit("meta.save")
    for _ in range(3):
        with pytest.raises(OSError) as e:
            failpoint.hit("meta.save")
        assert e.value.errno == errno.ENOSPC


def test_fsync_eio_poisons_the_log_for_good(tmp_path):
    """fsyncgate: after a failed fsync nothing more is written, even once the disk is fine again."""
    log = SegmentLog(tmp_path / "log")
    log.append([Entry(1, 1, 0, b"a")])
    failpoint.configure("wal.fsync=error(EIO)@1")
    with pytest.raises(OSError):
        log.append([Entry(1, 2, 0, b"b")])
    assert log.last_index() == 1  # the failed batch was never acknowledged into the index
    with pytest.raises(LogStorageFailedError, match="failed earlier"):
        log.append([Entry(1, 2, 0, b"b")])
    log.close()
    reopened = SegmentLog(tmp_path / "log")  # the restart decides: the torn/unsynced batch is either whole or gone
    assert reopened.first_index() == 1 and reopened.last_index() in (1, 2)
    reopened.close()


def test_meta_save_error_leaves_the_old_term_and_vote(tmp_path):
    ms = FileMetaStorage(tmp_path)
    ms.save(HardState(3, "a"))
    failpoint.configure("file.before_rename=error(EIO)")
    with pytest.raises(OSError):
        ms.save(HardState(4, "b"))
    assert FileMetaStorage(tmp_path).load() == HardState(3, "a")


def test_crash_is_sigkill_read_from_the_environment_once(tmp_path):
    code = (
        "from raft.storage import FileMetaStorage\nfrom raft.core.messages import HardState\n"
        f"ms = FileMetaStorage({str(tmp_path)!r})\n"
        "for t in range(1, 10):\n    ms.save(HardState(t, 'x'))\nprint('survived')\n"
    )
    env = dict(os.environ, CONTROLLERD_FAILPOINTS="meta.save=crash@4", PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGKILL and b"survived" not in p.stdout
    assert FileMetaStorage(tmp_path).load() == HardState(3, "x")  # hit 4 died before writing term 4
    bad = dict(env, CONTROLLERD_FAILPOINTS="meta.save=boom")
    p = subprocess.run([sys.executable, "-c", code], env=bad, capture_output=True, timeout=60)
    assert p.returncode != 0 and b"CONTROLLERD_FAILPOINTS: cannot parse 'meta.save=boom'" in p.stderr
