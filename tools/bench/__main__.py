"""python -m tools.bench <benchmark> [options]; benchmarks: all (every figure of issue 14), raft, snapshot, statemachine, http, audit, remoting,
failover_rocketmq (real RocketMQ brokers), peers (RocketMQ's own controllers side by side, issue 25), tls (heartbeats
with and without TLS, issue 27), realistic_ab (the realistic row's p99, source trees alternating), handover (what a
remoting front end in a process of its own would move and add per heartbeat, issue 25)."""

from __future__ import annotations

import sys


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in (
        "all",
        "raft",
        "snapshot",
        "statemachine",
        "http",
        "audit",
        "remoting",
        "failover_rocketmq",
        "peers",
        "tls",
        "realistic_ab",
        "handover",
    ):
        print("usage: python -m tools.bench all [--quick] [--json FILE] [--reps N] [--only SECTIONS]", file=sys.stderr)
        print("       python -m tools.bench raft [--seconds N] [--json FILE] [--peer pysyncobj]", file=sys.stderr)
        print(
            "       python -m tools.bench snapshot [--sizes 10,100] [--entries N] [--json F] [--quick]", file=sys.stderr
        )
        print(
            "       python -m tools.bench statemachine [--sets N] [--seconds S | --count N] [--json FILE]",
            file=sys.stderr,
        )
        print(
            "       python -m tools.bench http [--seconds S] [--connections C] [--clients P] [--json F] [--quick]",
            file=sys.stderr,
        )
        print(
            "       python -m tools.bench audit [--entries N] [--sets S] [--dir D] [--keep] [--json F]", file=sys.stderr
        )
        print(
            "       python -m tools.bench remoting [--seconds S] [--connections C] [--clients P] [--json F] [--quick]",
            file=sys.stderr,
        )
        print("       python -m tools.bench failover_rocketmq [--kills N] [--no-freeze] [--json FILE]", file=sys.stderr)
        print(
            "       python -m tools.bench peers [--rounds R] [--systems ours,jraft,dledger] [--quick] [--json F]",
            file=sys.stderr,
        )
        print("       python -m tools.bench tls [--seconds S] [--connections C] [--reps R] [--json F]", file=sys.stderr)
        print(
            "       python -m tools.bench realistic_ab --trees NAME=DIR,NAME=DIR [--rounds R] [--brokers N] [--json F]",
            file=sys.stderr,
        )
        print(
            "       python -m tools.bench handover [--count N] [--batches 1,10,50,200] [--reps R] [--json F]",
            file=sys.stderr,
        )
        return 2
    if sys.argv[1] == "handover":
        from tools.bench import handover

        return handover.main(sys.argv[2:])
    if sys.argv[1] == "realistic_ab":
        from tools.bench import realistic_ab

        return realistic_ab.main(sys.argv[2:])
    if sys.argv[1] == "tls":
        from tools.bench import tls_bench

        return tls_bench.main(sys.argv[2:])
    if sys.argv[1] == "peers":
        from tools.bench import peers

        return peers.main(sys.argv[2:])
    if sys.argv[1] == "failover_rocketmq":
        from tools.bench import failover_rocketmq

        return failover_rocketmq.main(sys.argv[2:])
    if sys.argv[1] == "all":
        from tools.bench import all as all_bench

        return all_bench.main(sys.argv[2:])
    if sys.argv[1] == "audit":
        from tools.bench import audit_bench

        return audit_bench.main(sys.argv[2:])
    if sys.argv[1] == "remoting":
        from tools.bench import remoting_bench

        return remoting_bench.main(sys.argv[2:])
    if sys.argv[1] == "http":
        from tools.bench import http_bench

        return http_bench.main(sys.argv[2:])
    if sys.argv[1] == "statemachine":
        from tools.bench import statemachine_bench

        return statemachine_bench.main(sys.argv[2:])
    if sys.argv[1] == "snapshot":
        from tools.bench import snapshot_bench

        return snapshot_bench.main(sys.argv[2:])
    from tools.bench import raft_bench

    return raft_bench.main(sys.argv[2:])


if __name__ == "__main__":
    raise SystemExit(main())
