"""The real-process cluster harness lives in tools/cluster.py (the torture sweeps use it too; tools must not
import tests); re-exported here for the daemon and torture tests."""

from tools.cluster import ROOT, ControllerdCluster

__all__ = ["ROOT", "ControllerdCluster"]
