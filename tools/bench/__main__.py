"""python -m tools.bench <benchmark> [options]; benchmarks: raft."""

from __future__ import annotations

import sys


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("raft",):
        print("usage: python -m tools.bench raft [--seconds N] [--json FILE] [--peer pysyncobj]", file=sys.stderr)
        return 2
    from tools.bench import raft_bench

    return raft_bench.main(sys.argv[2:])


if __name__ == "__main__":
    raise SystemExit(main())
