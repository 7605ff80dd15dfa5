"""Which nodes are one raft group, from what their data says (docs/audit.md, "Identity"). Pure: no Spark,
no files; the pipeline gathers each node's evidence and turns `Placement.unplaced` into findings.

Evidence per node: its configurations (the voters and learners of its CONF entries and snapshot metas, and
the initial configuration `jRaftInitConf` when a controller.conf beside its data gives it) and the group
its `IDENTITY` file names (or, without one, the conf's `jRaftGroupId`).

1. Nodes that share a configuration are one group (union-find).
2. Groups whose nodes name the same group id are one group unless their configurations contradict it: both
   have configurations and neither's configurations name a node of the other (two clusters left at the
   default `jRaft-Controller`).
3. A node that neither shares a configuration nor names a group (no IDENTITY, no conf), or that names a
   group id held by several groups it cannot be told apart from, cannot be placed: it stays alone and is
   reported (`group.unplaced`), never silently a group of one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Config = tuple[tuple[str, ...], tuple[str, ...]]  # (voters, learners), each sorted


@dataclass
class Evidence:
    nid: int
    name: str  # the node's label (discover.name_nodes)
    node_id: str | None  # IDENTITY's node id, else the conf's jRaftServerId
    group_id: str | None  # IDENTITY's group id, else the conf's jRaftGroupId
    configs: list[tuple[int, Config]] = field(default_factory=list)  # (log index; 0 for jRaftInitConf, config)


@dataclass
class Placement:
    group_of: dict[int, str]
    unplaced: dict[int, str]  # nid -> why it could not be placed


class _Sets:
    def __init__(self, items: list[int]) -> None:
        self.parent = {x: x for x in items}

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def place(nodes: list[Evidence]) -> Placement:
    sets = _Sets([n.nid for n in nodes])
    seen: dict[Config, int] = {}
    for n in nodes:
        for _, key in n.configs:
            if key in seen:
                sets.union(n.nid, seen[key])
            else:
                seen[key] = n.nid

    def components() -> dict[int, list[Evidence]]:
        out: dict[int, list[Evidence]] = {}
        for n in nodes:
            out.setdefault(sets.find(n.nid), []).append(n)
        return out

    def members(comp: list[Evidence]) -> set[str]:
        return {m for n in comp for _, (v, lr) in n.configs for m in (*v, *lr)}

    def ids(comp: list[Evidence]) -> set[str]:
        return {n.node_id for n in comp if n.node_id is not None}

    def group_id(comp: list[Evidence]) -> str | None:
        votes: dict[str, int] = {}
        for n in comp:
            if n.group_id is not None:
                votes[n.group_id] = votes.get(n.group_id, 0) + 1
        return max(sorted(votes), key=lambda g: votes[g]) if votes else None

    def contradict(a: list[Evidence], b: list[Evidence]) -> bool:
        ma, mb = members(a), members(b)
        return bool(ma and mb) and not (ma & ids(b)) and not (mb & ids(a))

    # Step 2: merge by group id, the groups with configurations first (they are the anchors).
    unplaced: dict[int, str] = {}
    by_id: dict[str, list[int]] = {}
    for root, comp in sorted(components().items(), key=lambda kv: (not members(kv[1]), kv[0])):
        gid = group_id(comp)
        if gid is not None:
            by_id.setdefault(gid, []).append(root)
    for gid, roots in sorted(by_id.items()):
        anchors: list[int] = []
        for root in roots:
            comp = components()[sets.find(root)]
            fits = [a for a in anchors if not contradict(components()[sets.find(a)], comp)]
            if not fits:
                anchors.append(root)
            elif len(fits) == 1 or members(comp):
                sets.union(fits[0], root)
            else:  # no configuration of its own and several groups of this id it could belong to
                for n in comp:
                    others = ", ".join("{" + ",".join(sorted(members(components()[sets.find(a)]))) + "}" for a in fits)
                    unplaced[n.nid] = (
                        f"IDENTITY names group {gid!r}, held by {len(fits)} groups whose configurations exclude "
                        f"each other ({others}), and no configuration of this node tells which"
                    )
    for comp in components().values():
        if len(comp) == 1 and not members(comp) and group_id(comp) is None:
            unplaced[comp[0].nid] = (
                "no IDENTITY file, no configuration in its log or snapshots and no controller.conf beside "
                "it (jRaftInitConf): nothing says which group it belongs to, so its log is compared with no "
                "other node's"
            )

    # Names: the group id; two groups of one id (or none) get their earliest configuration's voters.
    comps = components()
    label: dict[int, str] = {}
    for root, comp in comps.items():
        earliest = min(((i, c) for n in comp for i, c in n.configs), default=None)
        if earliest is not None:
            label[root] = ",".join(earliest[1][0])
        else:
            label[root] = ",".join(sorted(n.name for n in comp))
    named = {root: group_id(comp) for root, comp in comps.items()}
    taken: dict[str, int] = {}
    for g in named.values():
        if g is not None:
            taken[g] = taken.get(g, 0) + 1
    group_of: dict[int, str] = {}
    for root, comp in comps.items():
        g = named[root]
        if any(n.nid in unplaced for n in comp):
            name = f"unplaced[{label[root]}]" if g is None else f"{g}[unplaced:{label[root]}]"
        elif g is None:
            name = label[root]
        else:
            name = g if taken[g] == 1 else f"{g}[{label[root]}]"
        for n in comp:
            group_of[n.nid] = name
    return Placement(group_of, unplaced)
