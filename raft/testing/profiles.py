"""Fault profiles for the simulation: a seed picks one, so every profile runs in every batch of seeds."""

from __future__ import annotations

from raft.testing.sim import SimOptions

PROFILES: dict[str, SimOptions] = {
    "default": SimOptions(pause=0.003),
    "churn": SimOptions(
        crash=0.02, partition=0.02, drop=0.2, duplicate=0.1, max_delay=12, transfer=0.01, wipe=0.003, rollback=0.01
    ),
    "five": SimOptions(nodes=5, crash=0.01, partition=0.01, pause=0.004, steps=1000),
    "membership": SimOptions(spare_nodes=2, conf_change=0.01, crash=0.006),
    # Lease reads with clocks at different rates (within the drift bound the nodes are told), pauses of the
    # leader up to four election timeouts, transfers (abandoned ones too) and partitions.
    "lease": SimOptions(lease_read=True, clock_drift=0.05, pause=0.01, partition=0.005, transfer=0.01, crash=0.002),
    "powerloss": SimOptions(crash=0.03, lose_unsynced=1.0, partition=0.01, steps=800),
    # One voter plus learners grown to five voters, with power losses while the lone voter leads.
    "grow": SimOptions(
        nodes=1,
        learners=2,
        spare_nodes=2,
        plan=("voters=5",),
        plan_rate=0.02,
        crash=0.03,
        lose_unsynced=0.8,
        sync_rate=0.3,
        stall_new_leader=0.3,
    ),
    # Five voters shrunk to one and grown back (removals may pick the leader itself).
    "shrink-grow": SimOptions(nodes=5, plan=("voters=1", "voters=5"), plan_rate=0.08, partition=0.01, crash=0.006),
    # The leader removes itself from three voters, then from two; then back to three.
    "remove-leader": SimOptions(plan=("remove-leader", "remove-leader", "voters=3"), partition=0.015, crash=0.004),
    # Two members added back to back (learners, then promotions), twice.
    "add-two": SimOptions(spare_nodes=2, plan=("add-two", "voters=3", "add-two"), crash=0.006, partition=0.006),
    # The Raft paper's Figure 8 (deterministic schedule), then ordinary faults.
    "figure8": SimOptions(nodes=5, script="figure8", crash=0.006, partition=0.006, steps=800),
}


def profile_for(seed: int) -> tuple[str, SimOptions]:
    name = list(PROFILES)[seed % len(PROFILES)]
    return name, PROFILES[name]
