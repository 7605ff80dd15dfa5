"""The parts of a node's data directory (controllerStorePath; docs/layout.md), named once: the node creates
them (raft/node/node.py) and the offline readers find them by these names (rmqctl, the Spark audit, the
corruption tools). The files inside each part are named by their format's module: `wal_meta` and the
segments by raft/storage/segment.py, `raft_meta` by raft/storage/meta.py, `LOCK` by raft/storage/dirlock.py,
`IDENTITY` by raft/storage/identity.py, `snapshot_<N>` by snapshot/storage.py."""

LOG_DIR = "log"  # the WAL: segments and wal_meta
META_DIR = "meta"  # raft_meta: term and vote
SNAPSHOT_DIR = "snapshot"  # snapshot_<N> directories
DOWNLOAD_DIR = "snapshot-download"  # an InstallSnapshot download in progress
