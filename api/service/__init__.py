"""The controller service: one controller node (Raft node + controller state machine) and the duties of its
leader, apart from any front end.

* controller.py: ControllerService (stamped writes, ReadIndex reads, the scan timer, config proposal,
  hand-over on stop) and ServiceOptions;
* admin.py: its typed admin operations (`service.admin`: leadership transfer and the transferee choice,
  membership changes, snapshots);
* errors.py: what it raises instead of a Result, and the one mapping from Raft errors to those;
* outcome.py: the one mapping from an outcome to a request's metric status and to RocketMQ's 2007;
* requests.py: one frozen dataclass per RocketMQ request;
* settings.py (ApiSettings), metrics.py (ControllerMetrics), config_requests.py (the 1009/1010 rules),
  properties.py (java.util.Properties syntax): what both front ends need beyond the service itself.

Front ends (api/http/, api/remoting/) import, of api/, only this package and their own (tests/test_layers.py);
docs/request-path.md follows one request through.
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
    ApiError,
    CommandArgumentError,
    MemberNotFoundError,
    NotLeaderError,
    RefusedError,
    UnavailableError,
    checked,
    invalid,
    shown,
    validation_error,
)
from api.service.outcome import NOT_LEADER_REMARK, not_leader_result, observe, request_status

__all__ = [
    "NOT_LEADER_REMARK",
    "READ_CODES",
    "ApiError",
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
    "invalid",
    "not_leader_result",
    "observe",
    "request_status",
    "shown",
    "validation_error",
    "most_caught_up",
    "wall_ms",
]
