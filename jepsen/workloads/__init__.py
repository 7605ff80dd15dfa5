"""The workloads of the suite, one module each (docs/jepsen.md, "Workloads"):

- `register`: read, write and cas on KV keys; the linearizability checker;
- `set`: unique elements added to sets held in KV keys; the set checker;
- `controller`: simulated brokers on the controller's endpoints; the controller-invariant checker.

Each module pairs its generator and client (a `base.Workload`) with the vocabulary of its ops and its
checker, and names them in its `SPEC`. `WORKLOADS` maps a workload's name to that spec, in the order the
checkers report.
"""

from jepsen.workloads import controller, register
from jepsen.workloads import set as set_workload
from jepsen.workloads.base import WorkloadSpec

WORKLOADS: dict[str, WorkloadSpec] = {s.name: s for s in (register.SPEC, set_workload.SPEC, controller.SPEC)}

__all__ = ["WORKLOADS", "WorkloadSpec"]
