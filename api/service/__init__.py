"""The controller service: one controller node (Raft node + controller state machine) and the duties of its
leader, apart from any front end.

* controller.py: ControllerService (stamped writes, ReadIndex reads, the scan timer, config proposal,
  hand-over on stop) and ServiceOptions;
* admin.py: its typed admin operations (`service.admin`: leadership transfer and the transferee choice,
  membership changes, snapshots);
* errors.py: what it raises instead of a Result, and the one mapping from Raft errors to those.

Front ends (api/http/ today) call only this package; docs/request-path.md follows one request through.
"""

from api.service.admin import AdminOperations, Membership, SnapshotTaken, Transfer, choose_transferee, most_caught_up
from api.service.controller import (
    READ_CODES,
    CommitTimeout,
    ControllerService,
    Deadlines,
    Peer,
    ServiceOptions,
    wall_ms,
)
from api.service.errors import (
    CommandArgumentError,
    MemberNotFoundError,
    NotLeaderError,
    RefusedError,
    UnavailableError,
    checked,
)

__all__ = [
    "READ_CODES",
    "AdminOperations",
    "CommandArgumentError",
    "CommitTimeout",
    "ControllerService",
    "Deadlines",
    "MemberNotFoundError",
    "Membership",
    "NotLeaderError",
    "Peer",
    "RefusedError",
    "ServiceOptions",
    "SnapshotTaken",
    "Transfer",
    "UnavailableError",
    "checked",
    "choose_transferee",
    "most_caught_up",
    "wall_ms",
]
