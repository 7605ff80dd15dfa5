"""The package arrows of docs/layout.md, checked on the source: a forbidden import fails here, not in review."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = ("raft", "statemachine", "snapshot", "api", "cli", "tests", "jepsen", "tools")
LEAF = "raft.leaf"  # imports nothing of ours; every package may import it


def imports(package: str) -> list[tuple[str, str]]:
    """(file, imported module) for every absolute import of one of our packages from outside `package`/."""
    own = package.replace("/", ".")
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            out += [
                (str(path.relative_to(ROOT)), n)
                for n in names
                if n.split(".")[0] in OURS and n != own and not n.startswith(own + ".")
            ]
    return out


def is_leaf(module: str) -> bool:
    return module == LEAF or module.startswith(LEAF + ".")


def offending(package: str, forbidden: tuple[str, ...], *, leaf_ok: bool = True) -> list[tuple[str, str]]:
    return [(f, m) for f, m in imports(package) if m.split(".")[0] in forbidden and not (leaf_ok and is_leaf(m))]


def test_the_leaf_imports_nothing_of_ours() -> None:
    assert imports("raft/leaf") == []


def test_snapshot_imports_nothing_of_ours_but_the_leaf() -> None:
    assert offending("snapshot", tuple(p for p in OURS if p != "snapshot")) == []


def test_the_raft_log_storage_does_not_import_the_snapshot_package() -> None:
    assert offending("raft/storage", ("snapshot",)) == []


def test_arrows_that_must_never_exist() -> None:
    assert offending("raft", ("statemachine", "api", "cli", "jepsen", "tools", "tests")) == []
    assert offending("statemachine", ("raft", "api", "cli", "jepsen", "tools", "tests")) == []
    assert offending("api", ("cli", "tests")) == []  # the daemon and CLIs are built on api, never the reverse
    for package in ("api", "cli", "tools", "jepsen"):
        assert offending(package, ("jepsen", "tools")) == [], package


def node_reaches(package: str) -> list[tuple[str, int, str]]:
    """(file, line, expression) for every `<...>.node` attribute read in `package`/."""
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "node":
                out.append((str(path.relative_to(ROOT)), node.lineno, ast.unparse(node)))
    return out


def test_the_front_ends_call_only_the_service_never_its_raft_node() -> None:
    """api/http and api/remoting ask ControllerService (is_leader, leader, node_status, admin, ...); reaching
    through it into `service.node` would tie a front end to the Raft node's API (docs/request-path.md)."""
    assert node_reaches("api/http") == []
    assert node_reaches("api/remoting") == []


def test_the_service_is_a_closed_facade_in_api() -> None:
    """Outside api/service, nothing in api/ (front ends, metrics, logs, the UI) reads a `.node` or `.sm`
    attribute: ControllerService answers what they need (log_context, cluster_of, heartbeat_rows, ...)."""
    out = []
    for path in sorted((ROOT / "api").rglob("*.py")):
        if path.is_relative_to(ROOT / "api" / "service"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in ("node", "sm"):
                out.append((str(path.relative_to(ROOT)), node.lineno, ast.unparse(node)))
    assert out == []


def imports_of(where: str, package: str) -> list[tuple[str, str]]:
    """(file, module) for every import in `where` (a directory or a file) of `package` (dotted) or below it;
    `from api import http` counts as importing api.http."""
    path = ROOT / where
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    out = set()
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            out |= {(str(file.relative_to(ROOT)), n) for n in names if n == package or n.startswith(package + ".")}
    return sorted(out)


FRONT_ENDS = ("api/http", "api/remoting")


def front_end_reaches(front_end: str, root: Path = ROOT) -> list[tuple[str, str]]:
    """(file, module) for every module of `api` that `front_end` (api/http or api/remoting) imports outside its
    own package and api/service. `from api import logs` counts as importing api.logs; a relative import is
    resolved against the file's package."""
    own = front_end.replace("/", ".")
    out = set()
    for file in sorted((root / front_end).rglob("*.py")):
        package = ".".join(file.relative_to(root).parent.parts)
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] != "api":
                    continue
                if not any(name == p or name.startswith(p + ".") for p in (own, "api.service")):
                    out.add((str(file.relative_to(root)), name))
    return sorted(out)


def test_the_front_ends_share_no_module_but_the_service() -> None:
    """api/http and api/remoting import, of `api`, only their own package and api/service: not each other, not
    api/server.py or api/logs.py. What both need (the typed requests, ApiError, the not-leader answer, how an
    outcome is counted, the settings, the metrics, the config requests' rules, the properties parser) lives in
    api/service, which imports neither front end (docs/layout.md)."""
    for front_end in FRONT_ENDS:
        assert front_end_reaches(front_end) == [], front_end
    for module in ("api.http", "api.remoting", "api.server", "api.logs"):
        assert imports_of("api/service", module) == [], module


def test_the_front_end_rule_refuses_each_way_out(tmp_path: Path) -> None:
    """The rule above on a made-up front end: its own package and the service pass; the other front end, a
    module of api/ outside the service (absolute, `from api import`, or relative) is named."""
    (tmp_path / "api/http/routes").mkdir(parents=True)
    (tmp_path / "api/http/routes/x.py").write_text(
        "import api.http.models\n"
        "from api.http.routes import common\n"
        "from api.service.metrics import ControllerMetrics\n"
        "from api.service import ControllerService\n"
        "from . import kv\n"
        "from api.remoting import codec\n"
        "from api import logs\n"
        "from api.server import ControllerServer\n"
        "from ...logs import install\n"
    )
    assert front_end_reaches("api/http", tmp_path) == [
        ("api/http/routes/x.py", "api.logs"),
        ("api/http/routes/x.py", "api.logs.install"),
        ("api/http/routes/x.py", "api.remoting.codec"),
        ("api/http/routes/x.py", "api.server.ControllerServer"),
    ]


def any_uses(package: str, root: Path = ROOT) -> list[tuple[str, int]]:
    """(file, line) of every `Any` (typing.Any, by name or attribute) in `package`/ outside statemachine/values.py,
    where the named aliases for what really is arbitrary (JSON, JSONObject, Unpacked, ...) are declared."""
    out = []
    for path in sorted((root / package).rglob("*.py")):
        if path == root / "statemachine" / "values.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Name)
                and node.id == "Any"
                or isinstance(node, ast.Attribute)
                and node.attr == "Any"
            ):
                out.append((str(path.relative_to(root)), node.lineno))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any[" in node.value:
                out.append((str(path.relative_to(root)), node.lineno))  # a quoted annotation
    return out


def test_any_only_by_a_name_that_says_why() -> None:
    """statemachine/, api/ and cli/ type every value; where one really is arbitrary (a JSON document, msgpack not
    yet checked, a row cell, a dataclass field helper, a pydantic type form) they use statemachine/values.py's
    named alias for it, never a bare Any (issue 26)."""
    for package in ("statemachine", "api", "cli"):
        assert any_uses(package) == [], package
