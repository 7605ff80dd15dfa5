"""deploy/prometheus: the alert rules pass `promtool check rules`, every alert has unit tests that
`promtool test rules` runs (a firing and a quiet case each), and a runbook section in docs/operations.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from tests.deploy.helpers import OPERATIONS, RULE_TESTS, RULES, alert_names, panel_queries, read
from tools.programs import which


def promtool(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = which("promtool")
    assert exe, "promtool missing: python -m tools.programs setup monitoring"
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


def test_promtool_check_rules() -> None:
    r = promtool("check", "rules", RULES)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in r.stdout


def test_promtool_test_rules_cover_every_alert() -> None:
    r = promtool("test", "rules", os.path.basename(RULE_TESTS), cwd=os.path.dirname(RULE_TESTS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout
    tested = re.findall(r"alertname: (\w+)", read(RULE_TESTS))
    for name in alert_names():
        # at least one evaluation where it must fire and one where it must not
        assert tested.count(name) >= 2, name


def test_every_alert_has_a_runbook_section() -> None:
    doc = read(OPERATIONS)
    for name in alert_names():
        assert re.search(rf"^### {name}$", doc, flags=re.M), f"docs/operations.md has no '### {name}'"
        assert f"docs/operations.md#{name.lower()}" in read(RULES), name


def test_dashboard_queries_parse(tmp_path: Path) -> None:
    """Every panel query is valid PromQL: promtool checks each as a recording rule (JSON is YAML)."""
    queries = panel_queries()
    assert len(queries) >= 20
    rules = [{"record": f"panel_{i}", "expr": expr} for i, (_title, expr) in enumerate(queries)]
    path = tmp_path / "panels.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    r = promtool("check", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
