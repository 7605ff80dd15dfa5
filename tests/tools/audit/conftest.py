"""One SparkSession (local[2]) and one clean 3-node cluster run per test module; each test audits a copy."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.testdata.cluster_data import build_cluster_data


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from tools.audit.job import session

    s = session(
        "local[2]",
        "ERROR",
        spark_ui_enabled="false",
        spark_ui_showConsoleProgress="false",
        spark_default_parallelism="2",
    )
    yield s
    s.stop()


@pytest.fixture(scope="module")
def clean_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("cluster")
    return root, build_cluster_data(root)


@pytest.fixture
def data(clean_data: tuple[Path, dict[str, int]], tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """A private copy of the clean data dirs, for one injected fault."""
    src, marks = clean_data
    dst = tmp_path / "data"
    shutil.copytree(src, dst)
    return dst, marks
