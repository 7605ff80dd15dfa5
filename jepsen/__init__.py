"""The Jepsen suite: a black-box test of the controller over HTTP (docs/jepsen.md).

`jepsen.history` is the history format; `jepsen.checker` judges a recorded history offline
(linearizability per key, set, controller invariants); `python -m jepsen` is the command line.
"""
