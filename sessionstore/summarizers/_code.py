"""Code changes in tool output: unified diffs, numbered listings, enclosing symbols.

What the working-state tracker (`_changes`) reads to say what changed where: the hunks of
a diff with their file, first new line and enclosing context, the numbered lines an
editor prints, and the function or class a changed line sits in.
"""

from __future__ import annotations

import re

from sessionstore.summarizers._scan import head_tail

__all__ = [
    "Hunk",
    "defined_names",
    "diff_hunks",
    "hunk_symbol",
    "numbered_lines",
    "symbol_at",
]

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@ ?(.*)$")
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)|^\+\+\+ (?:b/)?(\S+)")
_NUMBERED = re.compile(r"^\s{0,8}(\d{1,6})(?::|\t| \| |→)(.*)$")
_SYMBOL = re.compile(
    r"^(\s*)(?:(?:async\s+)?def|(?:(?:public|private|protected|abstract|final|static|export"
    r"|default)\s+)*(?:class|interface|enum|record|struct|trait)|(?:export\s+)?(?:async\s+)?"
    r"function|func|fn|sub"
    r"|(?:(?:public|private|protected|static|final|abstract|synchronized|override|internal"
    r"|virtual|inline)\s+)+(?:[\w<>\[\],.?]+\s+)?(?=\w+\s*\()"
    # A method with a return type and no modifier (`void run(int n) {`, `String name() {`).
    r"|(?=[\w<>\[\],.?]+\s+\w+\s*\([^;]*$)(?!(?:return|new|else|throw|case)\b)"
    r"[\w<>\[\],.?]+\s+)\s*\*?\s*([A-Za-z_$][\w$]*)"
)
_NOT_SYMBOLS = frozenset({"if", "for", "while", "switch", "catch", "return", "new", "else"})
_DEFINES = re.compile(
    r"^[ \t]*(?:async[ \t]+)?(?:def|class|function)[ \t]+([A-Za-z_]\w*)", re.MULTILINE
)


def defined_names(text: str) -> list[str]:
    """Return the functions and classes a piece of code defines (`def run`, `class Io`)."""
    return list(dict.fromkeys(m.group(1) for m in _DEFINES.finditer(head_tail(text))))


def numbered_lines(output: str) -> dict[int, str]:
    """Return the numbered lines a listing shows.

    `12:code`, `12<TAB>code`, `12 | code`, and `12→code` as Claude Code's `Read` shows them.
    """
    found: dict[int, str] = {}
    for line in head_tail(output).split("\n"):
        match = _NUMBERED.match(line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def symbol_at(lines: dict[int, str], number: int, text: str = "") -> str:
    """Return the symbol (`Class.method`) that encloses line `number` of a file, or "".

    Read from the file's lines seen so far: the nearest `def`/`class`/`function`/method
    line above, less indented than the changed line, and the ones enclosing it.
    """
    indent = _indent(text) if text.strip() else _indent(lines.get(number, ""))
    names: list[str] = []
    for line_number in sorted((n for n in lines if n <= number), reverse=True):
        line = lines[line_number]
        if not line.strip():
            continue
        match = _SYMBOL.match(line)
        if match and len(match.group(1)) < indent and match.group(2) not in _NOT_SYMBOLS:
            names.append(match.group(2))
            indent = len(match.group(1))
            if indent == 0:
                break
    return ".".join(reversed(names))


def hunk_symbol(context: str) -> str:
    """Return the name a diff hunk header's context names (`def parse(x):` -> `parse`)."""
    match = _SYMBOL.match(context)
    return match.group(2) if match and match.group(2) not in _NOT_SYMBOLS else ""


class Hunk:
    """One hunk of a unified diff: its file, first new line, enclosing context, changes."""

    __slots__ = ("added", "context", "line", "path", "removed")

    def __init__(self, path: str, line: int, context: str) -> None:
        self.path = path
        self.line = line
        self.context = context
        self.added: list[str] = []
        self.removed: list[str] = []


def diff_hunks(output: str) -> list[Hunk]:
    """Return the hunks of the unified diffs in an output (`git diff`, a submission)."""
    hunks: list[Hunk] = []
    path = ""
    current: Hunk | None = None
    for line in head_tail(output).split("\n"):
        file_match = _DIFF_FILE.match(line)
        if file_match:
            path = next(g for g in file_match.groups() if g)
            current = None
            continue
        if line.startswith(("--- ", "index ", "new file mode", "deleted file mode")):
            continue
        hunk_match = _HUNK.match(line)
        if hunk_match and path:
            current = Hunk(path, int(hunk_match.group(1)), hunk_match.group(2).strip())
            hunks.append(current)
            continue
        if current is None:
            continue
        if line.startswith("+"):
            current.added.append(line[1:])
        elif line.startswith("-"):
            current.removed.append(line[1:])
        elif not line.startswith((" ", "\\")) and line.strip():
            current = None
    return hunks
