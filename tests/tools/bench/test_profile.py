"""tools/bench/profile.py: py-spy over a real process for a window, and the shares of its folded stacks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.bench import profile, realistic_ab
from tools.cluster import ROOT

FOLDED = """\
<module> (a.py:1);serve (a.py:10);parse (codec.py:5) 6
<module> (a.py:1);serve (a.py:11);parse (codec.py:7) 2
<module> (a.py:1);serve (a.py:12);walk (a.py:20);walk (a.py:21) 2

"""


def test_top_merges_lines_and_counts_a_recursive_function_once(tmp_path: Path) -> None:
    one, two = tmp_path / "w0.txt", tmp_path / "w1.txt"
    one.write_text(FOLDED)
    two.write_text("<module> (a.py:1);idle (a.py:30) 8\n 2\n")  # 2 samples in native code only
    got = profile.top([str(one), str(two)], n=3)
    assert got["samples"] == 20
    assert got["self"] == [[40.0, "parse (codec.py)"], [40.0, "idle (a.py)"], [10.0, "walk (a.py)"]]
    inclusive = {fn: share for share, fn in profile.top([str(one), str(two)], n=10)["inclusive"]}
    assert inclusive == {
        "<module> (a.py)": 90.0,
        "serve (a.py)": 50.0,
        "idle (a.py)": 40.0,
        "parse (codec.py)": 40.0,
        "walk (a.py)": 10.0,  # on the stack twice in its 2 samples, counted once
        profile.NATIVE: 10.0,
    }


def test_a_bad_line_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("<module> (a.py:1) 3\n 2\nno count here\n")  # line 2: native code only, no Python frame
    with pytest.raises(ValueError, match=r"line 3: not 'frame;...;frame COUNT'"):
        profile.top([str(bad)])


def test_record_samples_a_real_process_in_its_busy_function(tmp_path: Path) -> None:
    # the child spins in `churn` and says so after each million steps, until its stdin closes
    child = textwrap.dedent(
        """
        import sys, threading
        done = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
        def churn():
            while not done.is_set():
                s = 0
                for i in range(1_000_000):
                    s += i
                print("step", flush=True)
        churn()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out = tmp_path / "churn.txt"
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "step\n"  # it runs
        with profile.record(proc.pid, str(out)):
            for _ in range(10):  # the window: ten more million-step rounds
                assert proc.stdout.readline() == "step\n"
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    got = profile.top([str(out)], n=1)
    assert got["samples"] > 0
    [[share, fn]] = got["self"]
    assert fn == "churn (<string>)" and share > 50, got


def test_record_an_empty_window_still_leaves_a_file(tmp_path: Path) -> None:
    # the window starts once py-spy is sampling: a SIGINT before its handler is set would kill it without a file
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for n in range(3):
            out = tmp_path / f"empty-{n}.txt"
            with profile.record(proc.pid, str(out)):
                pass
            assert out.exists()
    finally:
        proc.kill()
        proc.wait()


def test_record_names_a_process_py_spy_cannot_read(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # gone: its pid names no process now
    with pytest.raises(RuntimeError, match=rf"py-spy on pid {proc.pid} did not start sampling.*process is running"):
        with profile.record(proc.pid, str(tmp_path / "gone.txt")):
            pass


def test_realistic_ab_refuses_profile_without_py_spy(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(profile, "available", lambda: None)
    with pytest.raises(SystemExit) as e:
        realistic_ab.parse(["--trees", f"a={ROOT}", "--profile", "/tmp/x"])
    assert e.value.code == 2 and "--profile: py-spy is not installed" in capsys.readouterr().err
