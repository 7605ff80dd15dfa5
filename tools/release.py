"""Released trees kept in the repository, so that a clone without tags or history can still run them.

The upgrade test (tests/daemon/test_upgrade.py) runs the previous release's nodes beside this tree's. A CI
checkout may have neither the release's tag nor its commits, so each release this tree must interoperate with
is kept as `releases/<tag>.tar.xz`: `git archive <tag>` of the paths a node runs from (RUNTIME), compressed with
xz. `releases/index.json` records, per tag, the commit it was packed from, the archive's SHA-256 and size.

    python -m tools.release pack v0.4.0     # after tagging: write releases/v0.4.0.tar.xz and its index entry
    python -m tools.release list            # the kept releases

`extract` checks the SHA-256 before it unpacks anything and refuses, naming the file and both digests, an
archive that does not match its index entry.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ROOT / "releases"
# What a controller node of a release runs from: its packages, its default configs and its build metadata.
RUNTIME = ("api", "cli", "conf", "raft", "snapshot", "statemachine", "tools", "pyproject.toml")


class ReleaseError(Exception):
    pass


def _index(releases: Path) -> dict[str, dict[str, object]]:
    path = releases / "index.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ReleaseError(f"{path}: expected a JSON object of tag -> entry")
    return data


def pack(tag: str, repo: Path = ROOT, releases: Path = RELEASES) -> dict[str, object]:
    """Archive `tag`'s RUNTIME paths of `repo` into `releases/<tag>.tar.xz` and record it in the index."""
    rev = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if rev.returncode != 0:
        raise ReleaseError(f"no tag {tag} in {repo}")
    commit = rev.stdout.strip()
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "--name-only", commit], capture_output=True, text=True, check=True
    ).stdout.split()
    paths = [p for p in RUNTIME if p in listed]
    tar = subprocess.run(["git", "-C", str(repo), "archive", commit, *paths], capture_output=True, check=True).stdout
    blob = lzma.compress(tar, preset=9)
    releases.mkdir(parents=True, exist_ok=True)
    out = releases / f"{tag}.tar.xz"
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(blob)
    os.replace(tmp, out)
    entry: dict[str, object] = {
        "commit": commit,
        "sha256": hashlib.sha256(blob).hexdigest(),
        "bytes": len(blob),
        "paths": paths,
    }
    index = _index(releases)
    index[tag] = entry
    (releases / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return entry


def extract(tag: str, dst: Path, releases: Path = RELEASES) -> Path:
    """Unpack the kept release `tag` into `dst` (created) after checking its SHA-256; returns `dst`."""
    index = _index(releases)
    if tag not in index:
        kept = ", ".join(sorted(index)) or "none"
        raise ReleaseError(
            f"release {tag} is not kept in {releases} (kept: {kept}); pack it: python -m tools.release pack {tag}"
        )
    path = releases / f"{tag}.tar.xz"
    if not path.exists():
        raise ReleaseError(f"{path}: missing, but {releases / 'index.json'} lists {tag}")
    blob = path.read_bytes()
    want = index[tag]["sha256"]
    got = hashlib.sha256(blob).hexdigest()
    if got != want:
        raise ReleaseError(f"{path}: SHA-256 {got} does not match {want} recorded in {releases / 'index.json'}")
    dst.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(blob))) as tar:
        tar.extractall(dst, filter="data")
    return dst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="archive a tagged release into releases/")
    p.add_argument("tag")
    sub.add_parser("list", help="the kept releases")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "pack":
            e = pack(args.tag)
            print(f"{args.tag}: {e['commit']} -> releases/{args.tag}.tar.xz, {e['bytes']} bytes, sha256 {e['sha256']}")
        else:
            for tag, e in sorted(_index(RELEASES).items()):
                print(f"{tag}  {e['commit']}  {e['bytes']:>8} bytes  sha256 {e['sha256']}")
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
