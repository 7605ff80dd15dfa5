"""Finding the data directories under the inputs, through the local filesystem or Spark's Hadoop layer.

A data directory (controllerStorePath) holds `log/` and/or `snapshot/` (cli/rmqctl/store.py); an input may
be one, or a directory above several (up to three levels). Only names, sizes and the small wal_meta and
IDENTITY files are read here, on the driver; segments and snapshots are read by the executors.

A node is labelled by its IDENTITY file (raft/storage/identity.py: group id and node id, written by the node
at its first start), so renamed or copied directories keep their labels; a directory without one (a copy
made before nodes wrote it) is labelled by its name, and the audit says so (`identity.missing`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from raft.storage.identity import IDENTITY_FILE, DataDirIdentity, IdentityError, decode_identity
from raft.storage.layout import LOG_DIR, SNAPSHOT_DIR
from raft.storage.segment import WAL_META_FILE
from raft.storage.walscan import WalListing, list_segments
from snapshot.storage import SNAPSHOT_NAME
from tools.audit.tasks import local_path

MAX_DEPTH = 3
CONF_SUFFIXES = (".conf", ".properties")
MAX_CONF_BYTES = 1 << 16


@dataclass(frozen=True)
class InitConf:
    """What a node's controller.conf says about its group: configuration evidence for grouping."""

    path: str
    group: str | None  # jRaftGroupId
    node: str | None  # jRaftServerId
    voters: tuple[str, ...]  # jRaftInitConf: the initial configuration


class InputError(Exception):
    """An input path that does not exist or holds no data directory (exit 2)."""


@dataclass
class NodeInput:
    nid: int
    uri: str  # the data directory
    name: str = ""
    listing: WalListing | None = None
    snapshots: dict[int, tuple[str, list[str]]] = field(default_factory=dict)  # index -> (dir uri, file names)
    quarantined: list[str] = field(default_factory=list)
    listing_error: tuple[str, int, str] | None = None
    identity: DataDirIdentity | None = None  # None: no IDENTITY file, or a damaged one (identity_error)
    identity_error: tuple[str, int, str] | None = None  # (path, offset, reason)
    init_conf: InitConf | None = None  # the node's controller.conf, found beside its data (find_init_conf)

    @property
    def local(self) -> bool:
        return local_path(self.uri) is not None


class LocalFs:
    def isdir(self, uri: str) -> bool:
        return os.path.isdir(local_path(uri) or uri)

    def ls(self, uri: str) -> list[tuple[str, int, bool]]:
        path = local_path(uri) or uri
        out = []
        for n in sorted(os.listdir(path)):
            st = os.stat(os.path.join(path, n))
            out.append((n, st.st_size, os.path.isdir(os.path.join(path, n))))
        return out

    def read(self, uri: str) -> bytes:
        with open(local_path(uri) or uri, "rb") as f:
            return f.read()


class HadoopFs:
    """Spark's Hadoop FileSystem, through the JVM (hdfs://, s3a://, abfs://, file://...)."""

    def __init__(self, spark: Any) -> None:
        self.jvm = spark.sparkContext._jvm
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, uri: str) -> tuple[Any, Any]:
        p = self.jvm.org.apache.hadoop.fs.Path(uri)
        return p.getFileSystem(self.conf), p

    def isdir(self, uri: str) -> bool:
        fs, p = self._fs(uri)
        return bool(fs.exists(p) and fs.getFileStatus(p).isDirectory())

    def ls(self, uri: str) -> list[tuple[str, int, bool]]:
        fs, p = self._fs(uri)
        return sorted((s.getPath().getName(), int(s.getLen()), bool(s.isDirectory())) for s in fs.listStatus(p))

    def read(self, uri: str) -> bytes:
        fs, p = self._fs(uri)
        stream = fs.open(p)
        try:  # a Java byte[] returned by a call comes back as Python bytes (one filled in place would not)
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()


def join(uri: str, name: str) -> str:
    return uri.rstrip("/") + "/" + name


def find_data_dirs(fs: LocalFs | HadoopFs, roots: list[str]) -> list[str]:
    found: list[str] = []
    for root in roots:
        if not fs.isdir(root):
            raise InputError(f"{root}: not a directory (expected a data dir, controllerStorePath, or a dir above some)")
        before = len(found)
        _walk(fs, root.rstrip("/") or "/", 0, found)
        if len(found) == before:
            raise InputError(
                f"{root}: no data directory (a dir with {LOG_DIR}/ or {SNAPSHOT_DIR}/) within {MAX_DEPTH} levels"
            )
    return list(dict.fromkeys(found))


def _walk(fs: LocalFs | HadoopFs, uri: str, depth: int, found: list[str]) -> None:
    entries = fs.ls(uri)
    dirs = {n for n, _, d in entries if d}
    if LOG_DIR in dirs or SNAPSHOT_DIR in dirs:
        found.append(uri)
        return
    if depth < MAX_DEPTH:
        for n in sorted(dirs):
            _walk(fs, join(uri, n), depth + 1, found)


def describe(fs: LocalFs | HadoopFs, nid: int, uri: str) -> NodeInput:
    node = NodeInput(nid, uri)
    if any(n == IDENTITY_FILE and not d for n, _, d in fs.ls(uri)):
        path = join(uri, IDENTITY_FILE)
        try:
            node.identity = decode_identity(fs.read(path), path)
        except IdentityError as e:
            node.identity_error = (path, e.offset, str(e))
    log_uri = join(uri, LOG_DIR)
    if fs.isdir(log_uri):
        entries = fs.ls(log_uri)
        meta = fs.read(join(log_uri, WAL_META_FILE)) if any(n == WAL_META_FILE for n, _, _ in entries) else None
        try:
            node.listing = list_segments([(n, s) for n, s, d in entries if not d], meta, join(log_uri, WAL_META_FILE))
        except Exception as e:  # noqa: BLE001 - LogCorruptionError: a damaged wal_meta is a finding
            node.listing_error = (join(log_uri, WAL_META_FILE), int(getattr(e, "offset", 0)), str(e))
    else:
        node.listing = list_segments([], None)
    snap_uri = join(uri, SNAPSHOT_DIR)
    if fs.isdir(snap_uri):
        for n, _, d in fs.ls(snap_uri):
            m = SNAPSHOT_NAME.fullmatch(n) if d else None
            if m is None:
                continue
            if m.group(2):
                node.quarantined.append(join(snap_uri, n))
                continue
            sdir = join(snap_uri, n)
            node.snapshots[int(m.group(1))] = (sdir, [f for f, _, fd in fs.ls(sdir) if not fd])
    node.init_conf = find_init_conf(fs, uri)
    return node


def find_init_conf(fs: LocalFs | HadoopFs, uri: str) -> InitConf | None:
    """The controller.conf of the data dir `uri`, when one lies beside it: a `.conf`/`.properties` file in the
    data dir itself, in its parent, or in the parent's `conf/` (where `controllerd local-cluster`, `make run`,
    writes `conf/nK.conf` for `nK/`), whose `controllerStorePath` is this directory (the same path, or the
    same last name: a copied tree) and which gives `jRaftInitConf`. A file that does not parse is no
    evidence. When several match, the first by path."""
    from api.service.properties import parse_properties  # driver only: executors never need it

    here = uri.rstrip("/")
    parent = here.rsplit("/", 1)[0] if "/" in here else "."
    name = here.rsplit("/", 1)[-1]
    places = [here, parent, join(parent, "conf")]
    for place in places:
        try:
            listing = fs.ls(place) if place and fs.isdir(place) else []
        except Exception:  # noqa: BLE001 - a parent we may not list (an object store's root): no evidence there
            continue
        for n, size, d in listing:
            if d or not n.endswith(CONF_SUFFIXES) or size > MAX_CONF_BYTES:
                continue
            path = join(place, n)
            try:
                props = {p.key: p.value for p in parse_properties(fs.read(path).decode(), path)}
            except Exception:  # noqa: BLE001 - unreadable or not properties (PropertiesError): no evidence
                continue
            voters = tuple(v.strip() for v in props.get("jRaftInitConf", "").split(",") if v.strip())
            if not voters:
                continue
            store = props.get("controllerStorePath", "").strip().rstrip("/")
            if store:
                if store != here and _local_abs(store) != _local_abs(here) and store.rsplit("/", 1)[-1] != name:
                    continue
            elif place != here:  # without controllerStorePath only a file inside the data dir is its own
                continue
            group = props.get("jRaftGroupId", "").strip() or None
            node = props.get("jRaftServerId", "").strip() or None
            return InitConf(path, group, node, voters)
    return None


def _local_abs(uri: str) -> str:
    path = local_path(uri)
    return os.path.abspath(path) if path is not None else uri


def name_nodes(nodes: list[NodeInput]) -> None:
    """Labels: the node id of the IDENTITY file; without one, the directory's name. Labels that are not unique
    (two copies of one node, nodes of two groups with equal ids, a directory named like another's node id)
    get the directory's name after an `@`, with as many parent names as it takes to be unique."""
    parts = {n.nid: n.uri.rstrip("/").split("/") for n in nodes}
    depth = 1
    while True:
        dirs = {nid: "/".join(p[-depth:]) for nid, p in parts.items()}
        if len(set(dirs.values())) == len(dirs) or depth > 8:
            break
        depth += 1
    labels = {n.nid: n.identity.node if n.identity is not None else dirs[n.nid] for n in nodes}
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    for n in nodes:
        label = labels[n.nid]
        n.name = label if counts[label] == 1 or n.identity is None else f"{label}@{dirs[n.nid]}"
