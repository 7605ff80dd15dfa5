"""Fault profiles for the simulation: a seed picks one, so every profile runs in every batch of seeds."""

from __future__ import annotations

from raft.testing.sim import SimOptions

PROFILES: dict[str, SimOptions] = {
    "default": SimOptions(),
    "churn": SimOptions(crash=0.02, partition=0.02, drop=0.2, duplicate=0.1, max_delay=12, transfer=0.01),
    "five": SimOptions(nodes=5, crash=0.01, partition=0.01, steps=1000),
    "membership": SimOptions(spare_nodes=2, conf_change=0.01, crash=0.006),
    "lease": SimOptions(lease_read=True, partition=0.01, transfer=0.01),
    "powerloss": SimOptions(crash=0.03, lose_unsynced=1.0, partition=0.01, steps=800),
}


def profile_for(seed: int) -> tuple[str, SimOptions]:
    name = list(PROFILES)[seed % len(PROFILES)]
    return name, PROFILES[name]
