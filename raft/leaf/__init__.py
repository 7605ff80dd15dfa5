"""Leaf modules: they import only the standard library, so every package may import them (docs/layout.md).

`durable` (fsync a directory, write a file fully, replace a file atomically) and `failpoint` (named crash,
delay and error points) serve the raft log and the snapshot store alike. `raft/__init__.py` is empty, so
importing `raft.leaf.*` loads nothing else of `raft`.
"""
