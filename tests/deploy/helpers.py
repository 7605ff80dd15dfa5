"""The shipped monitoring files (deploy/) as the tests read them: alert names, `for:` durations, dashboard
queries. Standard library only (no YAML parser): the rules file keeps one `- alert:` and one `for:` per line."""

from __future__ import annotations

import json
import os
import re

from tests.daemon.cluster import ROOT

RULES = os.path.join(ROOT, "deploy", "prometheus", "controllerd-alerts.yml")
RULE_TESTS = os.path.join(ROOT, "deploy", "prometheus", "controllerd-alerts.test.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "controllerd.json")
OPERATIONS = os.path.join(ROOT, "docs", "operations.md")


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def alert_names() -> list[str]:
    return re.findall(r"^\s*- alert: (\w+)$", read(RULES), flags=re.M)


def rules_with_for(duration: str) -> str:
    """The rules file with every `for:` set to `duration` (a test cannot wait the production minutes)."""
    return re.sub(r"^(\s+for:) \S+$", rf"\1 {duration}", read(RULES), flags=re.M)


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel of the dashboard."""
    dash = json.loads(read(DASHBOARD))
    return [(p["title"], t["expr"]) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]
