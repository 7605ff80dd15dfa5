"""Every program outside the venv that the project runs, in one table (PROGRAMS): who runs it, which Debian
packages provide it, and whether `make test` installs it or expects it from the base machine.

    python -m tools.programs setup [GROUP...]  install what is missing (tools/setup.sh runs it, and make test that)
    python -m tools.programs check             fail, naming the program, when the code runs a program that is not
                                               in the table, or a program of the table is missing here
    python -m tools.programs list              the table

`check` finds the programs the code runs statically (`scan`): literal program names given to `shutil.which`,
`subprocess.*`, `asyncio.create_subprocess_*` and `os.exec*`/`os.system`, directly or through a variable,
`self.<attribute>`, a module-local function returning the argv, or a module-local wrapper of those calls; the
program after `ip netns exec NS` and `env`; and absolute paths under /bin, /sbin, /usr/bin, /usr/sbin and
/usr/lib. The commands inside an `sh -c` script are not read. make test runs `setup`, then `check`, then
pytest: a test that needs a program make test did not install fails the run before the suite starts.

Standard library only: tools/setup.sh runs this module with the system python3, before the venv may exist.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHO = "tools/setup.sh"
# Searched after PATH: a non-root PATH often lacks the sbin directories, where `ip` and `nft` live.
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
FAKETIME_DIRS = ("/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/aarch64-linux-gnu/faketime", "/usr/lib/faketime")


@dataclass(frozen=True)
class Program:
    name: str  # as the code spells it: a command looked up on PATH, or a file name when `paths` is given
    packages: tuple[str, ...]  # the Debian packages to install: the first provides it, the others go with it
    installed: bool  # True: `setup` installs it when missing; False: expected from the base machine
    group: str  # `setup GROUP` installs the programs of one group
    users: str  # who runs it
    paths: tuple[str, ...] = ()  # where it is, when it is not a command on PATH (any one of them)


PROGRAMS: dict[str, Program] = {
    p.name: p
    for p in (
        Program("ip", ("iproute2",), True, "jepsen", "jepsen/net.py, jepsen/db.py: network namespaces (tests/jepsen)"),
        Program("nft", ("nftables",), True, "jepsen", "jepsen/net.py: partitions (tests/jepsen)"),
        Program(
            "libfaketimeMT.so.1",
            ("faketime",),
            True,
            "jepsen",
            "jepsen/db.py: LD_PRELOAD under the clock-skew nemesis (tests/jepsen)",
            tuple(f"{d}/libfaketimeMT.so.1" for d in FAKETIME_DIRS),
        ),
        Program(
            "chromium",
            ("chromium", "fonts-dejavu-core"),
            True,
            "browser",
            "tests/daemon/test_demo.py: the status page through Playwright",
            ("/usr/bin/chromium",),
        ),
        Program("wrk", ("wrk",), True, "bench", "tools/bench/wrk.py: HTTP load (tests/tools/bench/test_all_smoke.py)"),
        Program("pgrep", ("procps",), True, "tests", "tests/cli/test_localcluster.py"),
        Program(
            "prometheus",
            ("prometheus",),
            True,
            "monitoring",
            "tests/deploy/test_prometheus.py: a real Prometheus scraping a local group, evaluating deploy/ rules",
        ),
        Program(
            "promtool",
            ("prometheus",),
            True,
            "monitoring",
            "tests/deploy/test_rules.py: promtool check rules / test rules on deploy/prometheus",
        ),
        Program(
            "git",
            ("git",),
            True,
            "tests",
            "tools/release.py and tests/tools/test_release.py: `git archive` of a tagged release",
        ),
        Program("ss", ("iproute2",), True, "interop", "the RocketMQ interop suite: no connection beyond loopback"),
        Program(
            "java",
            ("openjdk-17-jre-headless",),
            False,
            "base",
            "PySpark (tools/audit and its tests, the standalone cluster of test_cluster.py); interop; "
            "Hadoop's MiniDFSCluster (interop/hadoop)",
        ),
        Program("javac", ("openjdk-17-jdk-headless",), False, "base", "the RocketMQ interop suite; interop/hadoop"),
        Program(
            "mvn",
            ("maven",),
            False,
            "base",
            "the RocketMQ interop suite: RocketMQ from Maven Central; interop/hadoop: Hadoop's jars",
        ),
        Program(
            "unshare",
            ("util-linux",),
            False,
            "base",
            "tests/tools/audit/spark_cluster.py: Spark workers in a mount namespace (data no executor can read)",
        ),
        Program("sh", ("dash",), False, "base", "tests/cli/test_localcluster.py; tools/programs.py (apt-install.sh)"),
        Program("env", ("coreutils",), False, "base", "jepsen/db.py: `ip netns exec NS env VAR=... python`"),
        Program("cp", ("coreutils",), False, "base", "tools/bench/snapshot_bench.py: sparse copies"),
        Program(
            "mount",
            ("mount",),
            False,
            "base",
            "tests/tools/torture/test_disk_full.py: small tmpfs disks; tests/tools/audit/spark_cluster.py (sh -c)",
        ),
        Program("umount", ("mount",), False, "base", "tests/tools/torture/test_disk_full.py"),
    )
}
GROUPS = sorted({p.group for p in PROGRAMS.values() if p.installed})


def find(p: Program) -> str | None:
    """Where `p` is on this machine, None when it is missing."""
    if p.paths:
        return next((f for f in p.paths if os.path.exists(f)), None)
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), *SBIN])
    return shutil.which(p.name, path=search)


def which(name: str) -> str | None:
    """Where program `name` of PROGRAMS is, None when it is missing. A name not in the table is an error: add it
    there first, so that make test installs it or checks that the base machine has it."""
    if name not in PROGRAMS:
        raise LookupError(f"{name} is not in tools/programs.py's PROGRAMS")
    return find(PROGRAMS[name])


# ------------------------------------------------------------------------------------------------------ scan


@dataclass(frozen=True)
class Use:
    file: str  # relative to the scanned root
    line: int
    program: str  # a command name, or an absolute path
    how: str  # the call or literal that names it


SPAWNERS = {
    "shutil.which",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    "pty.spawn",
    *(
        f"subprocess.{f}"
        for f in ("run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput")
    ),
    *(f"os.{f}" for f in ("system", "popen", "posix_spawn", "posix_spawnp")),
    *(f"os.exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
    *(f"os.spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
}
SYSTEM_DIRS = ("/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/lib/")
SKIP_DIRS = {"__pycache__", "node_modules", "build"}


def _qualified(func: ast.expr, aliases: dict[str, str]) -> str | None:
    """`subprocess.run` for `subprocess.run(...)`, `sp.run(...)` (import subprocess as sp) or `run(...)`
    (from subprocess import run)."""
    if isinstance(func, ast.Name):
        return aliases.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in aliases:
        return f"{aliases[func.value.id]}.{func.attr}"
    return None


def _callee(func: ast.expr) -> str | None:
    """The name of a module-local function or method being called: `f(...)`, `self.f(...)`."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
        return func.attr
    return None


class _Module:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, []).append(node)
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        # Module-local wrappers: functions that hand one of their parameters to a spawner as the program.
        self.wrappers: set[str] = set()
        for name, defs in self.functions.items():
            for f in defs:
                params = {a.arg for a in f.args.posonlyargs + f.args.args}
                for call in (n for n in ast.walk(f) if isinstance(n, ast.Call)):
                    first = call.args[0] if call.args else None
                    if self.spawner(call) and isinstance(first, ast.Name) and first.id in params:
                        self.wrappers.add(name)

    def spawner(self, call: ast.Call) -> str | None:
        q = _qualified(call.func, self.aliases)
        if q in SPAWNERS:
            return q
        name = _callee(call.func)
        return name if name in self.wrappers else None

    def scopes(self, node: ast.AST) -> list[ast.AST]:
        """The functions enclosing `node`, innermost first, then the module."""
        out: list[ast.AST] = []
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
                out.append(node)
        return out

    def values(self, name: ast.Name) -> list[ast.expr]:
        """What `name` may hold: its assignments (and `for name in (...)` items) in the enclosing scopes."""
        out: list[ast.expr] = []
        for scope in self.scopes(name):
            for node in ast.walk(scope):
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and t.id == name.id for t in targets):
                        out.append(node.value)
                elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id == name.id:
                    if isinstance(node.iter, ast.List | ast.Tuple | ast.Set):
                        out += node.iter.elts
            if out:
                return out
        return out

    def attributes(self, attr: str) -> list[ast.expr]:
        """What `self.<attr>` may hold: its assignments anywhere in the module."""
        return [
            node.value
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Attribute) and _callee(t) == attr for t in node.targets)
        ]

    def argvs(self, expr: ast.expr, depth: int = 0) -> list[list[ast.expr]]:
        """The argument vectors (or single program names) `expr` may stand for, as far as the source says."""
        if depth > 3:
            return []
        if isinstance(expr, ast.List | ast.Tuple):
            heads: list[list[ast.expr]] = [[]]
            for e in expr.elts:
                if isinstance(e, ast.Starred):
                    parts = self.argvs(e.value, depth + 1) or [[e]]
                    heads = [h + p for h in heads for p in parts]
                else:
                    heads = [h + [e] for h in heads]
            return heads
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left, right = self.argvs(expr.left, depth + 1), self.argvs(expr.right, depth + 1)
            return [a + b for a in left for b in right] if left and right else left
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [[ast.Constant(w) for w in expr.value.split()[:1]]]
        if isinstance(expr, ast.Name):
            return [v for value in self.values(expr) for v in self.argvs(value, depth + 1)]
        if isinstance(expr, ast.Attribute) and _callee(expr) is not None:
            return [v for value in self.attributes(expr.attr) for v in self.argvs(value, depth + 1)]
        if isinstance(expr, ast.Call) and (name := _callee(expr.func)) in self.functions:
            returns = [r.value for f in self.functions[name] for r in ast.walk(f) if isinstance(r, ast.Return)]
            return [v for value in returns if value is not None for v in self.argvs(value, depth + 1)]
        return []


def _word(e: ast.expr) -> str | None:
    return e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None


def _programs(argv: list[ast.expr]) -> Iterator[str]:
    """The literal programs of one argv: its head, and what `ip netns exec NS` and `env` run."""
    while argv and (head := _word(argv[0])):
        yield head
        if os.path.basename(head) == "ip" and [_word(e) for e in argv[1:3]] == ["netns", "exec"]:
            argv = argv[4:]
        elif os.path.basename(head) == "env":
            argv = argv[1:]
            # VAR=VALUE settings and options, literal or not (f-strings, a starred list of settings)
            while argv and (
                isinstance(argv[0], ast.JoinedStr | ast.Starred)
                or ((w := _word(argv[0])) is not None and ("=" in w or w.startswith("-")))
            ):
                argv = argv[1:]
        else:
            return


def _system_path(s: str) -> bool:
    return s.startswith(SYSTEM_DIRS) and s not in SYSTEM_DIRS


def scan_source(text: str, file: str) -> list[Use]:
    """The programs one Python source runs (see the module's docstring for what is found)."""
    mod = _Module(ast.parse(text, file))
    uses: list[Use] = []
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Call) and node.args and (how := mod.spawner(node)):
            for argv in mod.argvs(node.args[0]):
                uses += [Use(file, node.lineno, p, how) for p in _programs(argv)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _system_path(node.value):
            uses.append(Use(file, node.lineno, node.value, "path literal"))
    return sorted(set(uses), key=lambda u: (u.file, u.line, u.program))


def _skipped(directory: str, top: bool) -> bool:
    return (
        directory.startswith(".")
        or directory in SKIP_DIRS
        or directory.endswith(".egg-info")
        or (top and directory == "data")
    )


def sources(root: Path) -> Iterator[Path]:
    """Every Python file of the project: hidden directories (.venv), caches, build output and ./data left out."""
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not _skipped(x, Path(d) == root))
        yield from (Path(d) / f for f in sorted(files) if f.endswith(".py"))


def scan(root: Path = ROOT) -> list[Use]:
    return [u for path in sources(root) for u in scan_source(path.read_text(), str(path.relative_to(root)))]


def registered(program: str) -> bool:
    """Whether a program named by the code (a command name or an absolute path) is in PROGRAMS."""
    if not program.startswith("/"):
        return program in PROGRAMS
    paths = [f for p in PROGRAMS.values() for f in p.paths]
    # A directory of a registered file (FAKETIME_DIRS) counts; so does /usr/bin/NAME for a command NAME.
    return any(f == program or f.startswith(program.rstrip("/") + "/") for f in paths) or (
        os.path.dirname(program) + "/" in SYSTEM_DIRS[:4] and os.path.basename(program) in PROGRAMS
    )


# ------------------------------------------------------------------------------------------------ commands


def setup(groups: list[str]) -> int:
    """Install, with apt-get, the missing programs of `groups` (all when empty) that the table installs."""
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        print(f"{WHO}: unknown group {', '.join(unknown)} (groups: {', '.join(GROUPS)})", file=sys.stderr)
        return 2
    wanted = [p for p in PROGRAMS.values() if p.installed and (not groups or p.group in groups)]
    missing: list[Program] = []
    for p in wanted:
        where = find(p)
        print(f"{WHO}: {p.name} found at {where}" if where else f"{WHO}: {p.name} missing (package {p.packages[0]})")
        if where is None:
            missing.append(p)
    if not missing:
        print(f"{WHO}: nothing to install")
        return 0
    packages = list(dict.fromkeys(pkg for p in missing for pkg in p.packages))
    sys.stdout.flush()  # our lines before apt-get's
    if subprocess.run(["sh", str(ROOT / "tools" / "apt-install.sh"), WHO, *packages]).returncode != 0:
        return 1
    still = [p.name for p in missing if find(p) is None]
    if still:
        print(f"{WHO}: still missing after apt-get: {', '.join(still)}", file=sys.stderr)
        return 1
    return 0


def check(root: Path = ROOT) -> int:
    """0 when every program the code runs is in the table and every program of the table is here."""
    problems: list[str] = []
    uses = scan(root)
    for u in uses:
        if not registered(u.program):
            problems.append(
                f"{u.file}:{u.line}: {u.how} runs `{u.program}`, which is not in tools/programs.py's PROGRAMS: "
                "add it with its Debian package, installed by tools/setup.sh or expected from the base machine"
            )
    for p in PROGRAMS.values():
        if find(p) is None:
            how = "tools/setup.sh installs it: run it" if p.installed else "expected from the base machine"
            problems.append(f"`{p.name}` is missing (Debian package {p.packages[0]}; {how}); used by {p.users}")
    for line in problems:
        print(f"tools/programs.py check: {line}", file=sys.stderr)
    if problems:
        return 1
    files = len({u.file for u in uses})
    print(
        f"tools/programs.py check: {len(uses)} uses of programs in {files} files, all in the table; "
        f"the table's {len(PROGRAMS)} programs are all here"
    )
    return 0


def table() -> str:
    rows = [("program", "Debian package", "installed by", "used by")]
    for p in PROGRAMS.values():
        by = f"tools/setup.sh {p.group}" if p.installed else "the base machine"
        rows.append((p.name, " ".join(p.packages), by, p.users))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3] for r in rows)


def main(argv: list[str]) -> int:
    if argv[:1] == ["setup"]:
        return setup(argv[1:])
    if argv == ["check"]:
        return check()
    if argv == ["list"]:
        print(table())
        return 0
    print("usage: python -m tools.programs setup [GROUP...] | check | list", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
