"""Where the members listen: the raft, HTTP and remoting addresses the log's configuration carries, over this
node's configured ones, and the transport's peer map that follows every configuration the core holds.

The core stores a member's raft address and an opaque two-slot context (`raft.leaf.snapmeta.Context`); the
HTTP and remoting addresses live in that context, slot 0 and slot 1 ("" when unknown), encoded and decoded
here only (`member_context`, `context_addresses`; docs/log-format.md)."""

from __future__ import annotations

import logging

from raft.core import ConfState
from raft.core.messages import Context, Member, context_of
from raft.options import NodeOptions
from raft.transport.tcp import Address, format_address, parse_address

log = logging.getLogger("raft.node")


def member_context(http: str = "", remoting: str = "") -> Context:
    """The context a CONF entry stores for a member reached at `http` and `remoting` ("" when unknown)."""
    return (http, remoting)


def context_addresses(context: Context) -> tuple[str, str]:
    """(HTTP address, remoting address), "" when unknown, from a member's context."""
    http, remoting = context
    return http, remoting


class Members:
    def __init__(self, options: NodeOptions) -> None:
        self.opts = options
        self.id = options.node_id
        self.conf: ConfState | None = None  # the configuration the transport's peer map follows

    def known(self) -> tuple[Member, ...]:
        """The configured addresses of every configured peer, for a CONF entry: members the log has none for
        (the bootstrap members) become known to a node configured with fewer peers, or a new one."""
        o = self.opts
        return tuple(
            (p, format_address(a), *member_context(o.http_addresses.get(p, ""), o.remoting_addresses.get(p, "")))
            for p, a in sorted(o.peers.items())
        )

    def member_addresses(self, conf: ConfState) -> dict[str, tuple[str, str | None, str | None]]:
        """id -> (raft address, HTTP address or None, remoting address or None) of every member of `conf` (the
        latest configuration) and every configured peer: the log's addresses first, then this node's
        configuration."""
        o = self.opts
        out: dict[str, tuple[str, str | None, str | None]] = {
            pid: (format_address(addr), o.http_addresses.get(pid), o.remoting_addresses.get(pid))
            for pid, addr in o.peers.items()
        }
        for pid in conf.members():
            out.setdefault(pid, (pid, None, None))  # unknown: RocketMQ's ids are raft addresses
        for m in conf.addresses:
            pid, raft = m[0], m[1]
            http, remoting = context_addresses(context_of(m))
            out[pid] = (raft, http or out[pid][1], remoting or out[pid][2])
        return out

    def http_address(self, conf: ConfState | None, peer: str) -> str | None:
        return _addresses_of(conf, peer)[0] or self.opts.http_addresses.get(peer)

    def remoting_address(self, conf: ConfState | None, peer: str) -> str | None:
        return _addresses_of(conf, peer)[1] or self.opts.remoting_addresses.get(peer)

    def transport_peers(self) -> dict[str, Address]:
        """Where the transport reaches each node: the configured peers, overridden and extended by the
        addresses the latest configuration in the log carries (so it follows every appended, truncated or
        installed configuration)."""
        peers = dict(self.opts.peers)
        conf = self.conf
        for pid, raft, *_ in conf.addresses if conf is not None else ():
            if pid == self.id:
                continue  # we listen where our own configuration says
            try:
                peers[pid] = parse_address(raft)
            except ValueError:
                log.error(
                    "node %s: the log's address %r for %s is unusable; keeping the configured one", self.id, raft, pid
                )
        return peers

    def follow(self, conf: ConfState) -> bool:
        """The core's latest configuration is `conf`: True if the transport's peer map must change."""
        if conf is self.conf:
            return False
        changed = self.conf is None or conf.addresses != self.conf.addresses
        self.conf = conf
        return changed


def _addresses_of(conf: ConfState | None, peer: str) -> tuple[str, str]:
    """(HTTP, remoting) of `peer` as the log's configuration has them, "" when unknown."""
    context = conf.context(peer) if conf is not None else None
    return context_addresses(context) if context is not None else ("", "")
