"""The Jepsen suite: a black-box test of the controller over HTTP (docs/jepsen.md).

`jepsen.history` is the history format; `jepsen.workloads` the workloads, each with its client, generator
and checker; `jepsen.suite` judges a recorded history offline with the checkers of the workloads found in it
(`jepsen.checker` is the linearizability engine); `jepsen.client` the HTTP client, `jepsen.driver` the
threads that play the workloads, `jepsen.db`/`net`/`nemesis` the cluster, its network and its faults, and
`jepsen.run` one run's phases. `python -m jepsen` is the command line.
"""
