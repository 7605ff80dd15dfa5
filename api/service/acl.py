"""Who may change state over RocketMQ remoting: RocketMQ's request signing checked against the users of
`controllerAclFile` (docs/security.md, "ACL on remoting").

A RocketMQ client signs as AclClientRPCHook does (rocketmq-client 5.5.0): it adds extField `AccessKey` (and
`SecurityToken` if it has one), then `Signature` = Base64(HmacSHA1(secretKey, content)), where content is the
UTF-8 bytes of the values (not the keys) of every extField but `Signature`, in the order of their keys
(Java's TreeMap), followed by the body bytes. Brokers sign with broker.conf's
`innerClientAuthenticationCredentials={"accessKey":..,"secretKey":..}`, mqadmin with `$ROCKETMQ_HOME/conf/tools.yml`.

The users file is properties text, three keys per user (the access key may contain dots, the field is after
the last one):

    user.<accessKey>.secretKey=<secret>
    user.<accessKey>.role=admin | broker
    user.<accessKey>.brokerNames=broker-a,broker-b     (role broker: the broker sets it may act for)

It is re-read whenever it changes (mtime, size, inode); a change that does not parse keeps the previous users
and logs the reason once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from api.service.properties import PropertiesError, parse_properties

log = logging.getLogger("controllerd.acl")

ACCESS_KEY, SIGNATURE, SECURITY_TOKEN = "AccessKey", "Signature", "SecurityToken"  # SessionCredentials
UNSIGNED_FIELDS = frozenset({SIGNATURE, "controllerForwardedBy"})  # the latter: our follower -> leader mark
ROLES = ("admin", "broker")
BROKER_CODES = frozenset({904, 1001, 1002, 1003, 1012, 1013})  # heartbeat, alter SSS, elect, register, ids
ADMIN_CODES = frozenset({1009, 1011})  # update config, clean broker data: admin only
GUARDED = BROKER_CODES | ADMIN_CODES
"""Codes that change state: they need a signature of a user allowed to send them. Reads (1004, 1005, 1006,
1010) are served to anyone, as without ACL."""
REPLAY_WINDOW_S = 300.0
REPLAY_MAX = 100_000


def admin_request(code: int, ext: Mapping[str, str]) -> bool:
    """An operator's state-changing request: 1009, 1011, or an election naming its master (mqadmin electMaster)."""
    return code in ADMIN_CODES or (code == 1002 and ext.get("designateElect") == "true")


def signature(ext: Mapping[str, str], body: bytes | None, secret: str) -> str:
    """AclClientRPCHook's Signature of a request with these extFields and body."""
    content = "".join(v for k, v in sorted(ext.items()) if k not in UNSIGNED_FIELDS).encode()
    return base64.b64encode(hmac.new(secret.encode(), content + (body or b""), hashlib.sha1).digest()).decode()


def sign(ext: Mapping[str, str], body: bytes | None, access_key: str, secret: str) -> dict[str, str]:
    """`ext` with AccessKey and Signature added, as the Java hook sends it (our clients and the tests)."""
    out = {**ext, ACCESS_KEY: access_key}
    out[SIGNATURE] = signature(out, body, secret)
    return out


class AclFileError(ValueError):
    """The users file cannot be used: `str()` names file:line and the key."""


@dataclass(frozen=True)
class User:
    access_key: str
    secret: str
    role: str
    broker_names: frozenset[str]


def load_users(path: str) -> dict[str, User]:
    """The users of a controllerAclFile; AclFileError naming file:line when one is incomplete or wrong."""
    try:
        with open(path, encoding="utf-8") as text:
            props = parse_properties(text.read(), path)
    except (OSError, UnicodeDecodeError) as e:
        raise AclFileError(f"{path}: cannot read the ACL file: {e}") from None
    except PropertiesError as e:
        raise AclFileError(str(e)) from None
    fields: dict[str, dict[str, tuple[str, int]]] = {}
    for p in props:
        prefix, _, field = p.key.rpartition(".")
        if not prefix.startswith("user.") or field not in ("secretKey", "role", "brokerNames") or prefix == "user.":
            raise AclFileError(f"{path}:{p.line}: {p.key}: expected user.<accessKey>.secretKey|role|brokerNames")
        fields.setdefault(prefix.removeprefix("user."), {})[field] = (p.value, p.line)
    users = {}
    for ak, given in fields.items():
        line = min(n for _, n in given.values())
        secret = given.get("secretKey", ("", line))[0]
        if not secret:
            raise AclFileError(f"{path}:{line}: user {ak} has no secretKey")
        role, role_line = given.get("role", ("", line))
        if role not in ROLES:
            raise AclFileError(f"{path}:{role_line}: user {ak}: role {role!r} must be one of {', '.join(ROLES)}")
        names = frozenset(n.strip() for n in given.get("brokerNames", ("", line))[0].split(",") if n.strip())
        if role == "broker" and not names:
            raise AclFileError(f"{path}:{line}: user {ak} has role broker but no brokerNames")
        users[ak] = User(ak, secret, role, names)
    if not users:
        raise AclFileError(f"{path}: no user defined")
    return users


@dataclass(frozen=True)
class Denied:
    """A refused request: answered NO_PERMISSION (16) with `remark`."""

    remark: str


class Acl:
    """The users of one controllerAclFile, re-read when it changes, and the replay memory of admin requests."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.users = load_users(path)
        self._sig = _stat(path)
        self._failed: object = None
        self.seen: OrderedDict[str, float] = OrderedDict()  # admin signatures accepted -> when

    def current(self) -> dict[str, User]:
        sig = _stat(self.path)
        if sig != self._sig:
            try:
                self.users = load_users(self.path)
                log.info("ACL file %s reloaded: %d users", self.path, len(self.users))
            except AclFileError as e:
                if sig != self._failed:
                    log.error("ACL file not reloaded, the previous users stay in force: %s", e)
                    self._failed = sig
            self._sig = sig
        return self.users

    def check(self, code: int, ext: Mapping[str, str], body: bytes | None) -> User | Denied:
        """The user allowed to send this state-changing request, or why not."""
        ak = ext.get(ACCESS_KEY)
        given = ext.get(SIGNATURE)
        if not ak or not given:
            return Denied(f"request {code} changes state and needs a signed request (AccessKey and Signature)")
        user = self.current().get(ak)
        if user is None:
            return Denied(f"AccessKey {ak!r} is not a user of this controller")
        if not hmac.compare_digest(given, signature(ext, body, user.secret)):
            return Denied(f"the Signature of AccessKey {ak!r} does not match the request (wrong secret or altered)")
        if user.role == "broker":
            if code not in BROKER_CODES:
                return Denied(f"user {ak!r} (role broker) may not send request {code}")
            name = ext.get("brokerName", "")
            if name not in user.broker_names:
                allowed = ",".join(sorted(user.broker_names))
                return Denied(f"user {ak!r} (role broker) may act for broker sets {allowed} only, not {name!r}")
            return user
        if admin_request(code, ext):
            now = time.monotonic()
            while self.seen and (next(iter(self.seen.values())) < now - REPLAY_WINDOW_S or len(self.seen) > REPLAY_MAX):
                self.seen.popitem(last=False)
            if given in self.seen:
                return Denied(
                    f"replayed signed request: the same signed request {code} of {ak!r} was accepted "
                    f"{now - self.seen[given]:.0f} s ago; an admin request is accepted once per {REPLAY_WINDOW_S:.0f} s"
                )
            self.seen[given] = now
        return user


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return None
