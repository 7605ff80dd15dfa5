"""The corruption sweep: damage one file of a stopped node at every record and section boundary, start it, and
check it never runs with silently wrong state (docs/reliability.md).

A 3-node group takes writes until it has several snapshots and WAL segments; one follower (the victim) is
stopped cleanly and its store copied. For each case the store is restored from that copy, one file is damaged
at one boundary (a bit flipped, 8 bytes zeroed, or the file truncated there), and the victim is started next
to the two healthy nodes. Outcomes:

* refused: it exits non-zero and its last log lines name the damaged file, a byte offset and the fix;
* fallback: it starts, logs the damage with the file name (a quarantined snapshot, a torn WAL tail cut back),
  catches up from the leader (log or InstallSnapshot) and then holds exactly the acknowledged state; or
  (*repaired*) its WAL tail was cut at a frame boundary, which no local check can tell from a crash before
  the write, and it logs "lost acknowledged entries" when the leader's heartbeat shows it had acknowledged
  more than its log holds, then catches up;
* benign: it starts, logs nothing about that file and holds the right state (the damage removed nothing the
  node needs, e.g. WAL entries its newest snapshot holds);
* compacted: benign, and the damaged bytes are compacted records before the frame wal_meta's start hint
  names, which recovery does not read at all (`rmqctl log info` and the audit, which read every byte, do
  see the damage);
* silent: it runs with state that differs from the healthy replicas. Must be 0.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from raft.core import Role
from raft.storage.layout import LOG_DIR, META_DIR, SNAPSHOT_DIR
from raft.storage.meta import META_FILE as RAFT_META_FILE
from raft.storage.segment import HEADER_SIZE as WAL_HEADER_SIZE
from raft.storage.segment import SEGMENT_NAME, WAL_META_FILE, decode_wal_meta, frame_starts
from snapshot.format import ENTRY_SIZE, META_FILE, META_HEAD_SIZE, decode_header, decode_table, table_end
from snapshot.format import HEADER_SIZE as SNAP_HEADER_SIZE
from snapshot.storage import DATA_FILE
from tools.cluster import ControllerdCluster
from tools.torture.crash import CONF, ENV, Writers

MUTATIONS = ("flip", "zero", "truncate")
KINDS = ("wal", "wal_meta", "raft_meta", "snapshot_data", "snapshot_meta")
LOST = "lost acknowledged entries"  # raft/node/loop.py _report_lost


@dataclass(frozen=True)
class Case:
    kind: str  # one of KINDS
    rel: str  # path relative to the store
    offset: int
    mutation: str

    def __str__(self) -> str:
        return f"{self.mutation} {self.rel}@{self.offset}"


@dataclass
class CorruptReport:
    cases: int = 0
    refused: int = 0
    fallback: int = 0
    benign: int = 0
    compacted: int = 0  # benign, in compacted records recovery skips by wal_meta's start hint
    silent: list[str] = field(default_factory=list)
    benign_cases: list[str] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)  # refusals whose message does not name file and offset
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [cases, refused, fallback, benign]
    repaired: int = 0  # of the fallbacks: a cut WAL tail the node learned of from the leader's heartbeat
    seconds: float = 0.0

    @property
    def detected(self) -> int:
        return self.refused + self.fallback

    def lines(self) -> list[str]:
        kinds = "; ".join(
            f"{k}: {v[0]} cases, {v[1]} refused, {v[2]} fallback, {v[3]} benign"
            for k, v in sorted(self.by_kind.items())
        )
        return [
            f"cases {self.cases}, detected {self.detected} (refused {self.refused}, fallback {self.fallback}), "
            f"benign {self.benign} (in compacted records recovery does not read: {self.compacted}), "
            f"silent {len(self.silent)}, refusals not naming file+offset {len(self.unnamed)}",
            f"of the fallbacks, lost acknowledged entries reported by the leader's heartbeat: {self.repaired}",
            kinds,
            f"{self.seconds:.0f} s",
        ]


def _wal_boundaries(data: bytes) -> list[int]:
    """0, the header's fields, then the start of every frame (and of a preallocated segment's unused zeros),
    and the end of the file."""
    return [0, 8, 24, WAL_HEADER_SIZE - 4, *frame_starts(data), len(data)]


def _snapshot_boundaries(data: bytes, path: str) -> list[int]:
    """0, the header's fields, every section table row, the table's CRC, every section body, the end."""
    count = decode_header(data[:SNAP_HEADER_SIZE], len(data), path)
    table = decode_table(data[SNAP_HEADER_SIZE : table_end(count)], count, len(data), path)
    out = [0, 8, SNAP_HEADER_SIZE - 4, SNAP_HEADER_SIZE]
    out += [SNAP_HEADER_SIZE + ENTRY_SIZE * i for i in range(1, count)]
    out.append(table_end(count) - 4)
    out += sorted({e.offset for e in table})
    return out + [len(data)]


def enumerate_cases(store: Path) -> list[Case]:
    files: list[tuple[str, Path, list[int]]] = []
    for p in sorted((store / LOG_DIR).iterdir()):
        data = p.read_bytes()
        if SEGMENT_NAME.match(p.name):
            files.append(("wal", p, _wal_boundaries(data)))
        elif p.name == WAL_META_FILE:
            files.append(("wal_meta", p, [0, 4, 8, 16, 24, 32, len(data) - 4, len(data)]))
    meta = store / META_DIR / RAFT_META_FILE
    files.append(("raft_meta", meta, [0, 4, 8, 16, meta.stat().st_size - 4, meta.stat().st_size]))
    for sdir in sorted((store / SNAPSHOT_DIR).glob("snapshot_*")):
        data = (sdir / DATA_FILE).read_bytes()
        files.append(("snapshot_data", sdir / DATA_FILE, _snapshot_boundaries(data, str(sdir / DATA_FILE))))
        n = (sdir / META_FILE).stat().st_size
        files.append(("snapshot_meta", sdir / META_FILE, [0, 8, META_HEAD_SIZE, (n + META_HEAD_SIZE) // 2, n - 4, n]))
    cases = []
    for kind, path, bounds in files:
        size = path.stat().st_size
        for b in sorted(set(bounds)):
            for m in MUTATIONS:
                if m == "truncate" and b >= size or m != "truncate" and b >= size:
                    continue
                cases.append(Case(kind, str(path.relative_to(store)), b, m))
    return cases


def damage(path: Path, case: Case) -> None:
    """Apply the case's mutation in place (a preallocated segment is 64 MiB, mostly a hole: not rewritten)."""
    with open(path, "r+b") as f:
        if case.mutation == "truncate":
            f.truncate(case.offset)
            return
        f.seek(case.offset)
        old = f.read(8 if case.mutation == "zero" else 1)
        if case.mutation == "flip":
            new = bytes([old[0] ^ 0x10])
        elif old == bytes(len(old)):  # already zero: zeroing changes nothing
            new = b"\xff"
        else:
            new = bytes(len(old))
        f.seek(case.offset)
        f.write(new)


def run(
    root: str,
    *,
    sample: int = 1,
    spread: int | None = None,
    writes: int = 60,
    kinds: tuple[str, ...] = (),
    mutations: tuple[str, ...] = (),
    echo: Callable[[str], None] = print,
) -> CorruptReport:
    """Every `sample`th case (1: all) of the given file kinds and mutations only, when named; the report. With
    `spread`, about that many cases instead, evenly spaced over the enumeration: how many cases a store has
    depends on where its last snapshot fell (a fresh clone once had 4 WAL entries and one snapshot: 6 cases at
    `sample` 23, where other runs had 10 or more)."""
    shutil.rmtree(root, ignore_errors=True)
    c = ControllerdCluster(root, election_ms=300, extra=CONF)
    report = CorruptReport()
    t0 = time.monotonic()
    for i in range(3):
        c.start(i, ENV)
    try:
        c.wait_ready()
        w = Writers(c, n=2)
        w.start()
        with w.cond:
            w.cond.wait_for(lambda: len(w.acked) >= writes, 120)
        w.stop()
        acked = dict(w.acked)
        victim = (c.index_of(c.wait_ready()) + 1) % 3  # a follower of whoever leads now
        _tail_beyond_snapshot(c, victim, acked)
        assert c.terminate(victim) == 0
        store = Path(root) / f"n{victim}"
        pristine = Path(root) / "pristine"
        shutil.copytree(store, pristine)
        cases = [
            x
            for x in enumerate_cases(pristine)
            if (not kinds or x.kind in kinds) and (not mutations or x.mutation in mutations)
        ]
        cases = cases[:: max(1, len(cases) // spread) if spread else sample]
        echo(f"victim n{victim}: {len(cases)} cases over {len({x.rel for x in cases})} files")
        for case in cases:
            shutil.rmtree(store)
            shutil.copytree(pristine, store)
            damage(store / case.rel, case)
            outcome = _one(c, victim, case, acked)
            counts = report.by_kind.setdefault(case.kind, [0, 0, 0, 0])
            counts[0] += 1
            report.cases += 1
            if outcome == "refused":
                report.refused += 1
                counts[1] += 1
                tail = c.tail(victim, 8)
                if Path(case.rel).name not in tail or "offset" not in tail or "Fix:" not in tail:
                    report.unnamed.append(f"{case}: {tail[-300:]}")
            elif outcome in ("fallback", "repaired"):
                report.fallback += 1
                report.repaired += outcome == "repaired"
                counts[2] += 1
            elif outcome == "benign":
                report.benign += 1
                report.compacted += _before_the_start_hint(pristine, case)
                counts[3] += 1
                report.benign_cases.append(str(case))
            else:
                report.silent.append(f"{case}: {outcome}")
                echo(f"SILENT {case}: {outcome}")
    finally:
        c.stop_all()
    report.seconds = time.monotonic() - t0
    return report


def _one(c: ControllerdCluster, i: int, case: Case, acked: dict[str, str]) -> str:
    before = _log_size(c, i)
    p = c.start(i, ENV)
    try:
        ok = _caught_up(c, i, 60)
    except _Exited:
        ok = False
    if not ok:
        if p.poll() is None:
            c.kill(i)
            return "neither started nor refused within 60 s"
        c.readers[i].join(10)
        return "refused"
    wrong = _diff(c, i, acked)
    logged = _log_since(c, i, before)
    mentioned = case.rel.split("/")[1] in logged  # the segment, meta or snapshot dir name
    c.terminate(i)
    if wrong:
        return f"started with wrong state: {wrong[:3]}"
    if mentioned:
        return "fallback"
    # A WAL tail cut at a frame boundary reads like a crash before those writes; the leader, which counted
    # them as acknowledged, tells the node in its next heartbeat, and the node says so.
    return "repaired" if LOST in logged else "benign"


def _before_the_start_hint(store: Path, case: Case) -> bool:
    """Whether the case damaged a WAL segment below the frame wal_meta's start hint names (compacted records
    that recovery maps past without reading)."""
    m = SEGMENT_NAME.match(Path(case.rel).name)
    meta = store / LOG_DIR / WAL_META_FILE
    if case.kind != "wal" or m is None or not meta.exists():
        return False
    hint = decode_wal_meta(meta.read_bytes(), str(meta))
    return int(m.group(2), 16) == hint.start_seg_id and WAL_HEADER_SIZE <= case.offset < hint.start_offset


def _tail_beyond_snapshot(c: ControllerdCluster, victim: int, acked: dict[str, str]) -> None:
    """A few more writes, until the victim's log holds at least 4 entries its newest snapshot does not: a cut
    WAL tail then loses acknowledged entries that nothing else on the node holds (otherwise the snapshot
    would cover them all and every tail truncation would be harmless). Each write goes to whoever leads at
    that moment: on a loaded machine a 300 ms election timeout can move the leadership between two writes."""
    with httpx.Client(timeout=10) as client:
        for n in range(12):
            _caught_up(c, victim, 60)
            st = client.get(c.url(victim, "/api/v1/raft/status")).json()["body"]
            if st["lastLogIndex"] - st["lastSnapshotIndex"] >= 4:
                return
            key = f"tail{n}"
            leader = c.index_of(c.wait_ready())
            if client.put(c.url(leader, f"/api/v1/kv/t/{key}"), json={"value": key}).json().get("code") == 0:
                acked[key] = key
    raise AssertionError("the victim's log never reached 4 entries past its newest snapshot")


class _Exited(Exception):
    pass


def _caught_up(c: ControllerdCluster, i: int, timeout: float) -> bool:
    """True once node i has applied the leader's commit index; _Exited if the process ends first."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2) as client:
        while time.monotonic() < deadline:
            if c.procs[i].poll() is not None:
                raise _Exited
            try:
                sts = [client.get(c.url(j, "/api/v1/raft/status")).json()["body"] for j in range(3)]
            except (httpx.HTTPError, ValueError, KeyError):
                time.sleep(0.05)  # polling a real process's progress, not synchronising a test
                continue
            leaders = [s for s in sts if s["role"] == Role.LEADER]
            if leaders and sts[i]["appliedIndex"] >= leaders[0]["commitIndex"]:
                return True
            time.sleep(0.05)
    return False


def _diff(c: ControllerdCluster, i: int, acked: dict[str, str]) -> list[str]:
    wrong = []
    with httpx.Client(timeout=5) as client:
        for key, value in acked.items():
            got = (client.get(c.url(i, f"/api/v1/kv/t/{key}")).json().get("body") or {}).get("value")
            if got != value:
                wrong.append(f"{key}={got!r} (acked {value!r})")
    return wrong


def _log_size(c: ControllerdCluster, i: int) -> int:
    try:
        return os.path.getsize(c.log_path(i))
    except FileNotFoundError:
        return 0


def _log_since(c: ControllerdCluster, i: int, offset: int) -> str:
    with open(c.log_path(i), "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def iter_lines(report: CorruptReport) -> Iterator[str]:
    yield from report.lines()
    for s in report.silent[:10]:
        yield f"SILENT: {s}"
    for b in report.benign_cases[:20]:
        yield f"benign: {b}"
    for u in report.unnamed[:10]:
        yield f"refusal without file+offset: {u}"
