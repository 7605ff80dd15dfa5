"""Replay one simulation seed and print its event transcript: python -m raft.testing.replay SEED"""

from __future__ import annotations

import sys

from raft.testing.profiles import profile_for
from raft.testing.sim import InvariantViolation, Simulation


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m raft.testing.replay SEED", file=sys.stderr)
        return 2
    seed = int(argv[0])
    name, opts = profile_for(seed)
    sim = Simulation(seed, opts)
    try:
        sim.run()
        ok = True
    except InvariantViolation as exc:
        ok = False
        err = str(exc)
    print("\n".join(sim.log_lines))
    print(f"seed {seed} (profile {name}): {len(sim.acked)} acked writes, {sim.reads_done} reads, {sim.step_no} steps")
    if not ok:
        print(f"FAILED: {err}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
