"""Each controller.conf setting's default is declared once (issue 26): a literal default next to a key's name
(`setting("k", kind, 3)`, `key("k", kind, "3")`, `text_default=`/`default=`, or an entry of a `*DEFAULT*` dict)
stands in one place of the source. The replicated keys' defaults are statemachine/config.py's DEFAULTS, which
cli/config.py's table reads (replicated_key); a second copy anywhere fails here."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from cli.config import KEYS, parse_config
from statemachine.commands import CONFIG_KEYS
from statemachine.config import DEFAULTS, ReplicatedConfig

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("raft", "snapshot", "statemachine", "api", "cli", "tools", "jepsen")
DECLARERS = {"key", "setting", "replicated_key"}


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def default_declarations(names: set[str], root: Path = ROOT) -> dict[str, list[str]]:
    """key -> ["file:line", ...] for every literal default of one of `names` in the packages' source."""
    out: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            where = str(path.relative_to(root))
            for node in ast.walk(ast.parse(path.read_text(), where)):
                if isinstance(node, ast.Call):
                    func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                    name = _const_str(node.args[0]) if func in DECLARERS and node.args else None
                    literal = len(node.args) >= 3 or any(k.arg in ("default", "text_default") for k in node.keywords)
                    if name in names and literal:
                        out[name].append(f"{where}:{node.lineno}")
                elif isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and "DEFAULT" in t.id for t in targets):
                        for k in node.value.keys:
                            if k is not None and (name := _const_str(k)) in names:
                                out[name].append(f"{where}:{k.lineno}")
    return dict(out)


def test_every_setting_default_is_declared_once() -> None:
    names = {s.key for s in KEYS}
    twice = {k: v for k, v in default_declarations(names).items() if len(v) > 1}
    assert twice == {}


def test_the_replicated_defaults_are_the_state_machines() -> None:
    found = default_declarations(set(CONFIG_KEYS))
    assert {k: [w.split(":")[0] for w in v] for k, v in found.items()} == {
        k: ["statemachine/config.py"] for k in CONFIG_KEYS
    }
    cfg, _ = parse_config("", "<test>")
    assert {k: getattr(cfg, s.attr) for s in KEYS if (k := s.key) in CONFIG_KEYS} == DEFAULTS
    assert ReplicatedConfig().values() == DEFAULTS


def test_a_second_default_is_caught(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli/x.py").write_text(
        'a = key("electMasterMaxRetryCount", "int", "3")\n'
        'b = replicated_key("notifyBrokerRoleChanged", "bool", doc="no default: fine")\n'
        'MY_DEFAULTS = {"enableElectUncleanMaster": False, "other": 1}\n'
        'values = {"electMasterMaxRetryCount": 5}\n'
    )
    assert default_declarations(set(CONFIG_KEYS), tmp_path) == {
        "electMasterMaxRetryCount": ["cli/x.py:1"],
        "enableElectUncleanMaster": ["cli/x.py:3"],
    }
