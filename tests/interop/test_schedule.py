"""The interop schedule (tests/interop/conftest.py) names every file that holds an interop test."""

from pathlib import Path

from tests.interop.conftest import SECONDS

ROOT = Path(__file__).resolve().parents[2]


def test_every_interop_file_has_a_figure_and_every_figure_a_file():
    files = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("test_*.py")
        if p.name != Path(__file__).name and "pytest.mark.interop" in p.read_text()
    }
    assert files - SECONDS.keys() == set(), "give these interop files their seconds in tests/interop/conftest.py"
    assert SECONDS.keys() - files == set(), "these files in tests/interop/conftest.py hold no interop test"
