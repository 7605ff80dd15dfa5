"""Checkers that judge a recorded history (docs/jepsen.md, "Checkers").

- `linearizable`: WGL search per key against the KV register model (`models`, `wgl`);
- `sets`: lost, unexpected, stale and recovered elements of the set workload;
- `controller`: the controller workload's invariants;
- `suite`: picks the checkers for the workloads found in a history, builds `results.json` and the summary.

Every verdict is "valid", "invalid" or "unknown" (a budget ran out, or nothing could be judged).
"""

from jepsen.checker.suite import EXIT_CODE, EXIT_MALFORMED, CheckOptions, check_history, summary
from jepsen.checker.wgl import INVALID, UNKNOWN, VALID

__all__ = [
    "EXIT_CODE",
    "EXIT_MALFORMED",
    "INVALID",
    "UNKNOWN",
    "VALID",
    "CheckOptions",
    "check_history",
    "summary",
]
