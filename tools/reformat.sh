#!/bin/sh
# One-off: hand the layout of the Python sources to `ruff format` ([tool.ruff.format] in pyproject.toml).
# Removes every `# fmt: skip` marker (a trailing comment of its own, or the tail of a longer comment such as
# `# why  # fmt: skip`), then runs `ruff format` over the same paths as `make lint`. Comments are found with
# Python's tokenizer, so text inside strings is never touched. Run it once from the repository root with the
# venv set up (`make setup`), on a clean work tree, and commit the result as one commit; afterwards
# `ruff format --check` in `make lint` passes. Idempotent: a second run changes nothing.
set -eu

cd "$(dirname "$0")/.."
PY=.venv/bin/python
RUFF=.venv/bin/ruff
PATHS="raft snapshot statemachine api cli jepsen tests tools"

# shellcheck disable=SC2086 # PATHS is a list of words
"$PY" - $PATHS <<'EOF'
import io
import pathlib
import sys
import tokenize

MARKER = "# fmt: skip"


def strip_markers(text: str) -> str:
    lines = text.splitlines(keepends=True)
    cuts: dict[int, tuple[int, int]] = {}  # line number (1-based) -> (start column of the comment, its end)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and tok.string.rstrip().endswith(MARKER):
            cuts[tok.start[0]] = (tok.start[1], tok.end[1])
    for row, (start, end) in cuts.items():
        line = lines[row - 1]
        comment = line[start:end].rstrip()
        kept = comment[: -len(MARKER)].rstrip()  # "# why" of "# why  # fmt: skip"; "" for the bare marker
        head = line[:start].rstrip() if not kept else line[:start]
        ending = line[len(line.rstrip("\r\n")) :]
        lines[row - 1] = head + kept + line[end:].rstrip("\r\n") + ending
    return "".join(lines)


changed = 0
for root in sys.argv[1:]:
    for path in sorted(pathlib.Path(root).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if MARKER not in text:
            continue
        new = strip_markers(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed += 1
print(f"tools/reformat.sh: removed the fmt: skip markers from {changed} files")
EOF

# shellcheck disable=SC2086
"$RUFF" format $PATHS
# shellcheck disable=SC2086
"$RUFF" check $PATHS
