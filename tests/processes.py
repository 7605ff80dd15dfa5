"""The processes of this machine whose command line names a path (a test's directory): what tests check is gone."""

from __future__ import annotations

import os


def naming(text: str) -> dict[int, list[str]]:
    """pid -> argv of every process but this one whose command line contains `text`."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and text in " ".join(argv):
            found[int(entry)] = argv
    return found
