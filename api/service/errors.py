"""What the service answers instead of a Result: every front end (HTTP today, remoting later) maps these.

* NotLeaderError: this node does not lead, nothing was proposed; RocketMQ's 2007 naming the leader.
* UnavailableError: not served in time, or the node cannot serve; a proposal's outcome is unknown (HTTP 503).
* RefusedError: an admin operation the group's state forbids (a lagging transfer target, a peer already
  there, a configuration change in progress); nothing changed (HTTP 409). MemberNotFoundError: the peer to
  remove is no member (HTTP 404).
* CommandArgumentError: a command constructor refused an argument, naming the field; nothing was proposed
  (HTTP 422).
* ApiError: a request refused before anything is proposed, naming its fields (`invalid`,
  `validation_error`: HTTP 422 with the fields, a remoting SYSTEM_ERROR whose remark names them).

`outcome_of` is the one mapping from a Raft error (any raft.status.RaftBaseError: a coded RaftException,
a refused ConfChange, ...) to these; `request_status` and `not_leader_result` (outcome.py) the one mapping
from them to a request's metric status and to RocketMQ's 2007. Neither front end imports the other: both
take these from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from raft.core.confchange import ConfChangeError
from raft.status import RaftBaseError, RaftError, RaftException
from statemachine.commands import CommandError


class NotLeaderError(Exception):
    """This node does not lead; nothing was proposed. Maps to 2007 with the leader's id and HTTP address."""

    def __init__(self, leader_id: str, leader_address: str | None) -> None:
        super().__init__(f"not leader; leader is {leader_id or 'unknown'}")
        self.leader_id = leader_id
        self.leader_address = leader_address


class UnavailableError(Exception):
    """The request could not be completed in time or the node cannot serve; a proposal's effect is unknown
    (it may still commit), like a RocketMQ timeout. Maps to HTTP 503."""


class RefusedError(Exception):
    """An admin operation refused because of the group's state; nothing changed. `error` is the machine-readable
    reason (REFUSED, PEER_EXISTS). Maps to HTTP 409."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class MemberNotFoundError(RefusedError):
    """The peer an operation names is not a member of the group. Maps to HTTP 404."""

    def __init__(self, message: str) -> None:
        super().__init__("PEER_NOT_FOUND", message)


class CommandArgumentError(Exception):
    """A command constructor (statemachine.commands) refused an argument; nothing was proposed. `field` is
    the command field at fault (commands.FIELDS spelling), None when no single field is."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ApiError(Exception):
    """A request refused before anything is proposed: `status` (the HTTP status), `error` (machine-readable),
    `message`, `errors` (one {"field", "location", "message", "type"} per offending field) and the headers of
    the HTTP answer. The remoting front end answers it SYSTEM_ERROR with its fields in the remark."""

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        *,
        errors: list[dict[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.errors = errors
        self.headers = dict(headers or {})

    def remark(self) -> str:
        """Every field and its message, as one line (a remoting remark)."""
        return "; ".join(f"{x['field']}: {x['message']}" for x in self.errors or []) or self.message


def invalid(field: str, message: str, *, location: str = "body", type: str = "value_error") -> ApiError:
    """A 422 naming one field."""
    return validation_error([{"field": field, "location": location, "message": message, "type": type}])


def validation_error(errors: list[dict[str, str]]) -> ApiError:
    """A 422 naming every field in `errors`; the message names the first."""
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return ApiError(422, "VALIDATION_ERROR", f"{first['field']}: {first['message']}{more}", errors=errors)


SHOWN = 64  # characters of a refused value that a remark quotes (a frame may carry megabytes of it)


def shown(value: object) -> str:
    """A refused value as a remark quotes it: its repr, a text cut to its first SHOWN characters with its length
    after (anything else cut in its repr)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= SHOWN else f"{value[:SHOWN]!r}... ({len(value)} characters)"
    r = repr(value)
    return r if len(r) <= SHOWN else f"{r[:SHOWN]}... ({len(r)} characters)"


def checked(build: Callable[[int], bytes]) -> Callable[[int], bytes]:
    """`build`, with its argument errors turned into CommandArgumentError (never proposed, never a bug)."""

    def run(now: int) -> bytes:
        try:
            return build(now)
        except (TypeError, ValueError) as e:
            raise CommandArgumentError(str(e), e.field if isinstance(e, CommandError) else None) from e

    return run


def outcome_of(
    e: RaftBaseError,
    leader: Callable[[str], tuple[str, str | None]],
    *,
    read: bool = False,
    admin: bool = False,
) -> Exception:
    """The one mapping from a Raft error to what the service raises. `leader(hint)` is (leader id, its HTTP
    address), trying `hint` (the leader the error names) first.

    * EPERM, and for a read ELEADERCHANGED (the barrier was lost with the leadership): NotLeaderError;
    * for an admin operation, EBUSY (a transfer or a configuration change in progress), EINVAL (not a
      voter, already leader) and a refused configuration change: RefusedError; on the data path EBUSY is
      overload, so it stays a retryable UnavailableError;
    * anything else (stopped, storage failure, leadership lost after proposing, any other error of the raft
      package): UnavailableError."""
    if isinstance(e, ConfChangeError):
        return RefusedError("REFUSED", str(e))
    if not isinstance(e, RaftException):
        return UnavailableError(str(e))
    if e.code == RaftError.EPERM or (read and e.code == RaftError.ELEADERCHANGED):
        return NotLeaderError(*leader(e.leader))
    if admin and e.code in (RaftError.EBUSY, RaftError.EINVAL):
        return RefusedError("REFUSED", str(e))
    return UnavailableError(str(e))
