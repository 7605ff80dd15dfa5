"""Several audits in one Spark application, as the cluster tests run them (a cluster's application start is
most of a small audit's time):

    spark-submit [--master M --archives ENV#env ...] tests/tools/audit/audit_many.py OUT_ROOT NAME=PATH...
    python tests/tools/audit/audit_many.py --master local[2] OUT_ROOT NAME=PATH...

Each PATH is audited as `rmq-audit PATH --out OUT_ROOT/NAME --run-id cluster-test` would (the same session,
code shipping and executor check), its summary.json in OUT_ROOT/NAME; exit 0 when every audit ran."""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as a file (spark-submit): make the project importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def main(argv: list[str]) -> int:
    from tools.audit.job import check_executors, session, ship_code
    from tools.audit.pipeline import Options, run

    master = None
    if argv[:1] == ["--master"]:
        master, argv = argv[1], argv[2:]
    out_root, jobs = argv[0], [a.split("=", 1) for a in argv[1:]]
    spark = session(master, "ERROR", spark_ui_enabled="false", spark_ui_showConsoleProgress="false")
    try:
        if ship_code(spark) is not None:
            check_executors(spark)
        for name, path in jobs:
            r = run(spark, Options([path], os.path.join(out_root, name), "cluster-test", plots=False))
            print(
                f"audit_many: {name}: {r.total} finding(s), exit {r.exit_code}, {r.summary['seconds']}s",
                file=sys.stderr,
            )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
