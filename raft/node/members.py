"""Where the members listen: the raft, HTTP and remoting addresses the log's configuration carries, over this
node's configured ones, and the transport's peer map that follows every configuration the core holds."""

from __future__ import annotations

import logging

from raft.core import ConfState
from raft.options import NodeOptions
from raft.transport.tcp import Address, format_address, parse_address

log = logging.getLogger("raft.node")


class Members:
    def __init__(self, options: NodeOptions) -> None:
        self.opts = options
        self.id = options.node_id
        self.conf: ConfState | None = None  # the configuration the transport's peer map follows

    def known(self) -> tuple[tuple[str, str, str, str], ...]:
        """The configured addresses of every configured peer, for a CONF entry: members the log has none for
        (the bootstrap members) become known to a node configured with fewer peers, or a new one."""
        o = self.opts
        return tuple(
            (p, format_address(a), o.http_addresses.get(p, ""), o.remoting_addresses.get(p, ""))
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
        for pid, raft, http, remoting in conf.addresses:
            out[pid] = (raft, http or out[pid][1], remoting or out[pid][2])
        return out

    def http_address(self, conf: ConfState | None, peer: str) -> str | None:
        return _address_of(conf, peer, 2) or self.opts.http_addresses.get(peer)

    def remoting_address(self, conf: ConfState | None, peer: str) -> str | None:
        return _address_of(conf, peer, 3) or self.opts.remoting_addresses.get(peer)

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


def _address_of(conf: ConfState | None, peer: str, field: int) -> str:
    found = conf.address(peer) if conf is not None else None
    return found[field] if found is not None else ""
