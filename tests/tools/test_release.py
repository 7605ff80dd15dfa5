"""tools/release.py: a tagged tree packed into releases/, unpacked byte for byte, and a damaged archive refused
before anything is unpacked. The kept v0.3.0 archive matches its index entry (the upgrade test runs it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tools import release


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "raft").mkdir(parents=True)
    (r / "raft" / "core.py").write_text("TERM = 1\n")
    (r / "tests").mkdir()
    (r / "tests" / "test_x.py").write_text("not shipped\n")
    (r / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    git(r, "init", "-q")
    git(r, "add", ".")
    git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    git(r, "tag", "v9.9.9")
    (r / "raft" / "core.py").write_text("TERM = 2\n")  # after the tag: not in the release
    git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    return r


def test_pack_then_extract_gives_the_tagged_runtime_tree(repo: Path, tmp_path: Path) -> None:
    kept = tmp_path / "releases"
    entry = release.pack("v9.9.9", repo=repo, releases=kept)
    assert entry["paths"] == ["raft", "pyproject.toml"]  # only RUNTIME paths the tree has; tests/ is not shipped
    out = release.extract("v9.9.9", tmp_path / "out", releases=kept)
    assert (out / "raft" / "core.py").read_text() == "TERM = 1\n"
    assert not (out / "tests").exists()
    again = release.pack("v9.9.9", repo=repo, releases=tmp_path / "again")
    assert again["sha256"] == entry["sha256"]  # reproducible: the same tag packs to the same bytes


def test_a_damaged_archive_is_refused_before_anything_is_unpacked(repo: Path, tmp_path: Path) -> None:
    kept = tmp_path / "releases"
    release.pack("v9.9.9", repo=repo, releases=kept)
    path = kept / "v9.9.9.tar.xz"
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    path.write_bytes(bytes(blob))
    dst = tmp_path / "out"
    with pytest.raises(release.ReleaseError, match=r"v9\.9\.9\.tar\.xz: SHA-256 [0-9a-f]{64} does not match"):
        release.extract("v9.9.9", dst, releases=kept)
    assert not dst.exists()


def test_unknown_tags_are_named(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(release.ReleaseError, match=r"no tag v0\.0\.1 in"):
        release.pack("v0.0.1", repo=repo, releases=tmp_path / "r")
    with pytest.raises(release.ReleaseError, match=r"release v0\.0\.1 is not kept .*kept: none"):
        release.extract("v0.0.1", tmp_path / "out", releases=tmp_path / "r")


def test_the_kept_previous_release_matches_its_index(tmp_path: Path) -> None:
    from tests.daemon.test_upgrade import PREVIOUS

    out = release.extract(PREVIOUS, tmp_path / PREVIOUS)
    assert (out / "cli" / "controllerd.py").is_file() and (out / "raft").is_dir()
