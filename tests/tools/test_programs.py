"""tools/programs.py: the table of programs the code runs, and the static scan that keeps it complete."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import programs
from tools.programs import PROGRAMS, registered, scan, scan_source

SOURCE = """
import asyncio
import os
import shutil
import subprocess
import sys
from shutil import which as find


def _run(args, check=True):
    return subprocess.run(args, check=check)


class Net:
    def command(self, ns):
        return ["ip", "netns", "exec", ns, "env", "A=1", f"B={ns}", *SETTINGS, "nsenter", "-t", "1"]

    def start(self, ns):
        self.argv = ["java", "-cp", "x"]
        subprocess.Popen(self.argv)
        return subprocess.Popen(self.command(ns))


async def spawn():
    await asyncio.create_subprocess_exec("socat", "-", "tcp:x:1")


def other():
    shutil.which("jq")
    find("yq")
    subprocess.run(["curl", "-s", "http://x"])
    subprocess.check_output("tar xf a.tar", shell=True)
    os.execvp("strace", ["strace", "-f"])
    _run(["tc", "qdisc", "show"])
    base = ["ethtool"]
    _run(base + ["-k", "eth0"])
    cmd = ["lsof", "-i"]
    subprocess.run(cmd)
    for tool in ("dig", "host"):
        shutil.which(tool)
    subprocess.run([sys.executable, "-m", "tools.bench"])
    asyncio.run(spawn())
    sorted(["not", "a", "program"])
    return "/usr/bin/chromium", "/usr/lib/x86_64-linux-gnu/faketime", "/bin/"
"""


def test_every_program_the_code_runs_is_in_the_table() -> None:
    assert [u for u in scan() if not registered(u.program)] == []


def test_the_scan_finds_literal_programs_however_they_are_called() -> None:
    found = {(u.program, u.how) for u in scan_source(SOURCE, "x.py")}
    assert found == {
        ("ip", "subprocess.Popen"),
        ("env", "subprocess.Popen"),
        ("nsenter", "subprocess.Popen"),  # after `ip netns exec NS` and env's settings
        ("java", "subprocess.Popen"),  # through `self.argv`
        ("socat", "asyncio.create_subprocess_exec"),
        ("jq", "shutil.which"),
        ("yq", "shutil.which"),  # from shutil import which as find
        ("curl", "subprocess.run"),
        ("tar", "subprocess.check_output"),  # a shell string: its first word
        ("strace", "os.execvp"),
        ("tc", "_run"),  # a module-local wrapper of subprocess.run
        ("ethtool", "_run"),  # through `base + [...]`
        ("lsof", "subprocess.run"),  # through a variable
        ("dig", "shutil.which"),
        ("host", "shutil.which"),  # through `for tool in (...)`
        ("/usr/bin/chromium", "path literal"),
        ("/usr/lib/x86_64-linux-gnu/faketime", "path literal"),
    }


def test_paths_of_the_table_and_its_commands_are_registered() -> None:
    assert registered("/usr/bin/chromium") and registered("/usr/lib/x86_64-linux-gnu/faketime")
    assert registered("/usr/sbin/ip") and registered("wrk")
    # spelt in two parts: whole, these literals would be programs outside the table in this very file
    assert not registered("jq") and not registered("/usr/bin/" + "jq") and not registered("/usr/lib/" + "jvm")


def test_which_refuses_a_program_outside_the_table() -> None:
    with pytest.raises(LookupError, match="jq is not in tools/programs.py's PROGRAMS"):
        programs.which("jq")


def test_check_names_the_file_line_and_program_outside_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text('import shutil\n\nok = shutil.which("jq")\n')
    (tmp_path / "data").mkdir()  # make run's data directory is not scanned
    (tmp_path / "data" / "d.py").write_text('import shutil\nshutil.which("yq")\n')
    assert programs.check(tmp_path) == 1
    err = capsys.readouterr().err
    assert "pkg/m.py:3: shutil.which runs `jq`, which is not in tools/programs.py's PROGRAMS" in err
    assert "yq" not in err


def test_every_program_make_test_installs_has_a_package_and_a_group() -> None:
    for p in PROGRAMS.values():
        assert p.packages and p.users and (p.group in programs.GROUPS or not p.installed), p
    assert {"jepsen", "browser", "bench"} <= set(programs.GROUPS)
    assert PROGRAMS["wrk"].installed and not PROGRAMS["mvn"].installed


def test_setup_refuses_an_unknown_group_before_installing_anything(capsys: pytest.CaptureFixture[str]) -> None:
    assert programs.main(["setup", "nope"]) == 2
    assert "unknown group nope" in capsys.readouterr().err


def test_the_list_names_every_program_and_its_package() -> None:
    text = programs.table()
    for p in PROGRAMS.values():
        assert p.name in text and p.packages[0] in text
