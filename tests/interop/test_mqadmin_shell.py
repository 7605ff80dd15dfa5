"""cli/rocketmq.py's MQAdminShell, which the interop tests' `Deployment.mqadmin` runs mqadmin's commands in: one
JVM for many commands, each command's output apart from the others', nothing of one command left for the next,
and a command that outlives its timeout takes its JVM with it."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from cli import rocketmq
from cli.rocketmq import Deployment

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]


def test_commands_share_one_jvm_and_keep_their_output_and_options_apart(tmp_path: Any) -> None:
    rocketmq.require()
    with Deployment(os.path.join(str(tmp_path), "rmq")) as d:
        d.namesrv()
        listed = d.mqadmin("clusterList")  # Deployment.mqadmin adds -n <its NameServer>
        assert re.search(r"^#Cluster Name\s+#Broker Name", listed, re.M) and "Exception" not in listed, listed
        (shell,) = d.shells.values()
        pid = shell.pid
        assert d.mqadmin("nosuchverb") == "The sub command nosuchverb not exist."
        assert d.mqadmin("clusterList") == listed  # the same command, the same text, nothing of the one before
        assert shell.pid == pid, "every command ran in the JVM of the first"

        # A -n given to one command is not the next one's NameServer: without it, mqadmin has none.
        bare = shell.run(["clusterList"], 60)
        assert "#Cluster Name" not in bare and "Exception" in bare, bare
        assert shell.run(["clusterList", "-n", d.namesrv_addr], 60) == listed

        # A command that outlives its timeout: its JVM is killed, and the next command starts another.
        with pytest.raises(AssertionError, match=r"mqadmin clusterList -n \S+: .* within 0.001s"):
            d.mqadmin("clusterList", timeout=0.001)
        assert not shell.running()
        assert d.mqadmin("clusterList") == listed
        assert shell.pid != pid
