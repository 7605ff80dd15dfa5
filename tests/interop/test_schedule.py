"""The suite's schedule (tests/conftest.py) names every file that holds an interop test."""

from pathlib import Path

from tests.conftest import SECONDS

ROOT = Path(__file__).resolve().parents[2]


def test_every_interop_file_has_a_figure_and_every_figure_a_file():
    files = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("test_*.py")
        if p.name != Path(__file__).name and "pytest.mark.interop" in p.read_text()
    }
    assert files - SECONDS.keys() == set(), "give these interop files their seconds in tests/conftest.py"
    named = {f for f in SECONDS if f.startswith("tests/interop/") or f == "tests/tools/bench/test_ratios.py"}
    assert named - files == set(), "these files in tests/conftest.py's interop part hold no interop test"
    assert all((ROOT / f).is_file() for f in SECONDS), "tests/conftest.py names a file that is not there"
