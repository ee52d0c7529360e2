"""Write `_sqlite_context.STATEMENTS` again from the store's statements compiled for SQLite.

`sessionstore context` on a SQLite file reads without SQLAlchemy: it runs the context
read's statements as SQLite text kept in `sessionstore/_sqlite_context.py`, and
`tests/integration/cli/test_sqlite_context.py` holds each text equal to
`store._source.sqlite_compiled(name)`. After a change to one of those statements (or to
a column type it selects), this script writes the texts again, in the order
`_context_source.STATEMENTS` names them, and formats the file with ruff:

    python tools/sqlite_statements.py           # rewrite the file
    python tools/sqlite_statements.py --check   # exit 1 when the file is out of date
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from sessionstore._context_source import STATEMENTS as NAMES
from sessionstore.store._source import sqlite_compiled

TARGET = Path(__file__).resolve().parents[1] / "sessionstore" / "_sqlite_context.py"
HEAD = "STATEMENTS: dict[str, tuple[str, dict[str, Any], str]] = {\n"


def statements_source() -> str:
    """The `STATEMENTS = {...}` assignment, one entry a statement, one string a line of SQL."""
    lines = [HEAD]
    for name in NAMES:
        text, fixed, kinds = sqlite_compiled(name)
        parts = text.splitlines(keepends=True)
        lines.append(f"    {name!r}: (\n")
        lines.extend(f"        {part!r}\n" for part in parts[:-1])
        lines.append(f"        {parts[-1]!r},\n        {fixed!r},\n        {kinds!r},\n    ),\n")
    lines.append("}\n")
    return "".join(lines)


def rewritten(source: str) -> str:
    """`source` (the module's text) with its `STATEMENTS` assignment written again."""
    start = source.index(HEAD)
    end = source.index("\n}\n", start) + 3
    return source[:start] + statements_source() + source[end:]


def _formatted(source: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main() -> int:
    """Rewrite the file, or with `--check` say whether it is current (exit 1 when not)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is current")
    args = parser.parse_args()
    current = TARGET.read_text()
    new = _formatted(rewritten(current))
    if args.check:
        if new != current:
            print(f"{TARGET.name}: STATEMENTS is out of date; run {Path(__file__).name}")
            return 1
        print(f"{TARGET.name}: STATEMENTS is current")
        return 0
    if new != current:
        TARGET.write_text(new)
        print(f"{TARGET.name}: STATEMENTS written again")
    else:
        print(f"{TARGET.name}: STATEMENTS was current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
