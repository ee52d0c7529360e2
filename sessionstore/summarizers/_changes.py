"""The working state an agent leaves: the open file, the changes made, the latest diff (pure).

`WorkingState` follows what the tool calls of a conversation changed, as `extract_facts`
walks it: the file an editor harness has open (SWE-agent's `open`/`edit N:M`, named
relative to the harness's directory), the numbered lines outputs showed (to name the
symbol an edit falls in), per file the latest change (where, in which symbol, its first
new line, what it defines), and the changed lines of the latest diff. `output_paths`
reads the paths an output shows as touched (diffs, tracebacks, `path:line` hits).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sessionstore.summarizers._code import (
    Hunk,
    defined_names,
    diff_hunks,
    hunk_symbol,
    numbered_lines,
    symbol_at,
)
from sessionstore.summarizers._commands import Call
from sessionstore.summarizers._rounds import in_rounds
from sessionstore.summarizers._scan import collapse, cut, find_paths, head_tail, is_noise_path

__all__ = ["MAX_DIFF_LINES", "WorkingState", "output_paths"]

MAX_OUTPUT_PATHS = 10
MAX_DIFF_PATHS = 500
MAX_DIFF_LINES = 16
"""Changed lines of the latest diff kept in Active State."""
DIFF_LINES_PER_HUNK = 4
CHANGE_CHARS = 160
MAX_DEFINED = 6
"""Names a change defines (functions, classes) listed with it."""
MAX_FILE_LINES = 20_000
"""Numbered lines remembered per file (to name the symbol an edit falls in)."""

_DIFF_PATH = re.compile(r"^(?:diff --git a/(\S+) b/\S+|\+\+\+ b/(\S+)|--- a/(\S+))", re.MULTILINE)
_TRACE_PATH = re.compile(r'^\s*File "([^"]+)", line \d+', re.MULTILINE)
_LOCATED_PATH = re.compile(r"^([\w./-]+\.[A-Za-z]\w{0,7})(?::\d+|::\w)", re.MULTILINE)
_OPEN_FILE = re.compile(r"^\(Open file: (.+?)\)\s*$", re.MULTILINE)
_CURRENT_DIRECTORY = re.compile(r"^\(Current directory: (.+?)\)\s*$", re.MULTILINE)
_FILE_HEADER = re.compile(r"^\[File: (.+?) \(\d+ lines total\)\]", re.MULTILINE)
_SNIPPET_HEADER = re.compile(r"(?:snippet of|cat -n` on) (\S+?):?\s*$", re.MULTILINE)
_SED_SCRIPT = re.compile(
    r"""(?:^|\s)-[a-zA-Z]*i[a-zA-Z]*\s+(?:-e\s+)?(['"])(\d+)?(?:,\d+)?s(.)(.*?)\3(.*?)\3"""
)
_OPENED_FOR_WRITE = re.compile(
    r"""open\(\s*(?:(['"])([^'"\n]+)\1|(\w+))\s*,\s*['"][wa]b?\+?['"]"""
    r"""|Path\(\s*(['"])([^'"\n]+)\4\s*\)\.write_text\("""
)
_HEREDOC_START = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")
_ASSIGNED = re.compile(r"""^\s*(\w+)\s*=\s*(['"])([^'"\n]+)\2\s*$""", re.MULTILINE)


@dataclass(slots=True)
class WorkingState:
    """What the calls so far changed, and what an editor harness has open."""

    open_file: str = ""
    """The file an editor harness has open (`(Open file: ...)`), relative to `harness_dir`."""
    harness_dir: str = ""
    """The directory an editor harness says the agent is in (`(Current directory: ...)`)."""
    file_lines: dict[str, dict[int, str]] = field(default_factory=dict)
    changes: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Per file, the latest change made to it (file, symbol, first changed line)."""
    diff: list[str] = field(default_factory=list)
    """The changed lines of the latest diff an output showed."""

    def track_output(self, call: Call, output: str) -> None:
        """Follow the open file and remember the numbered lines an output shows."""
        header = _FILE_HEADER.search(output)
        shown = header.group(1) if header else ""
        if not shown:
            snippet = _SNIPPET_HEADER.search(output[:600])
            shown = snippet.group(1) if snippet else ""
        if not shown and call.verb in ("READ", "SEARCHED") and len(call.files) == 1:
            shown = call.files[0][0]
        if shown:
            lines = numbered_lines(output)
            if lines:
                known = self.file_lines.setdefault(shown, {})
                known.update(lines)
                if len(known) > MAX_FILE_LINES:
                    self.file_lines[shown] = dict(sorted(known.items())[-MAX_FILE_LINES:])
        directory = _CURRENT_DIRECTORY.findall(output[-1_000:])
        if directory:
            self.harness_dir = directory[-1].strip().rstrip("/")
        opened = _OPEN_FILE.findall(output[-1_000:])
        if opened and opened[-1].strip() not in ("n/a", "None", ""):
            self.open_file = self.relative(opened[-1].strip())
        elif header:
            self.open_file = self.relative(header.group(1))
        elif call.verb == "CREATED" and call.edit_lines is None and call.files:
            self.open_file = call.files[0][0]

    def relative(self, path: str) -> str:
        """Return a path the harness shows absolute as relative to its current directory.

        An editor harness names the open file by its absolute path; under the directory
        the agent works in, the relative form says the same in fewer tokens (every edit
        line names it) and is how the agent's own commands name the file.
        """
        prefix = f"{self.harness_dir}/" if self.harness_dir else ""
        if prefix and len(prefix) > 1 and path.startswith(prefix) and len(path) > len(prefix):
            return path[len(prefix) :]
        return path

    def lines_of(self, path: str) -> dict[int, str]:
        """Return the numbered lines seen of `path` (matched on the path's end)."""
        if path in self.file_lines:
            return self.file_lines[path]
        for known, lines in self.file_lines.items():
            if known.endswith("/" + path.lstrip("./")) or path.endswith("/" + known.lstrip("./")):
                return lines
        return {}

    def track_changes(
        self, call: Call, verb: str, path: str, output: str, *, clock: int
    ) -> list[tuple[str, str]]:
        """Record what a successful call changed: the file, the symbol, the first new line.

        Returns the files it changed, each with its note (`written`), or `""` where the
        file's own note stands (`edited` when it has none), for Relevant Files.
        """
        touched: list[tuple[str, str]] = []
        for hunk_path, line, symbol, first in _diff_changes(output, call.command, call.patch):
            self.change(hunk_path, line, symbol, first, clock=clock, touched=touched)
        hunks = diff_hunks(output) if "@@" in output else []
        if not hunks and "@@" in call.command and verb == "EDITED":
            hunks = diff_hunks(call.command)  # a patch the command applied
        if not hunks and call.patch:
            hunks = diff_hunks(call.patch)  # an `apply_patch` envelope
        if hunks:
            self.diff = _diff_lines(hunks)
        touched.extend((file_path, "written") for file_path in _written_by_script(call.command))
        if verb == "DELETED" or call.patch:
            # A patch's changes are its hunks', recorded above; the files it deletes go.
            for file_path, note in call.files:
                if verb == "DELETED" or note == "deleted":
                    self.changes.pop(file_path, None)
            return touched
        if verb not in ("EDITED", "WROTE", "CREATED"):
            return touched
        if call.edit_lines is not None and path:
            start = call.edit_lines[0]
            lines = self.lines_of(path)
            new = [line for line in call.replacement.split("\n") if line.strip()]
            old = {lines.get(n, "").strip() for n in range(start, call.edit_lines[1] + 1)}
            first = next((line for line in new if line.strip() not in old), new[0] if new else "")
            symbol = symbol_at(lines, start, first)
            names = defined_names(call.replacement)
            self.change(path, start, symbol, first, names, clock=clock, touched=touched)
            return touched
        if call.on_open_file and path:
            # An edit between cursors (`set_cursors N M`, then `edit`): the lines it wrote.
            new = [line for line in call.replacement.split("\n") if line.strip()]
            first = new[0] if new else ""
            names = defined_names(call.replacement)
            self.change(path, None, "", first, names, clock=clock, touched=touched)
            return touched
        written = call.replacement or _heredoc_body(call.command)
        for file_path, note in call.files:
            if note not in ("edited", "written") and not call.replacement:
                continue
            located = _located_change(call, self.lines_of(file_path), output)
            names = defined_names(written)
            self.change(file_path, *located, names, clock=clock, touched=touched)
        return touched

    def change(
        self,
        path: str,
        line: int | None,
        symbol: str,
        first: str,
        defines: list[str] | None = None,
        *,
        clock: int,
        touched: list[tuple[str, str]],
    ) -> None:
        """Record the latest change of `path`: where, its first new line, what it defines."""
        if is_noise_path(path):
            return
        touched.append((path, ""))
        first = first.split("\\n", 1)[0]
        names = [name for name in defines or [] if name != symbol][:MAX_DEFINED]
        if not (symbol or line or first.strip() or names):
            return  # Relevant Files already says it was written.
        where = f" in {symbol}" if symbol else ""
        at = f" at line {line}" if line else ""
        what = f": {cut(collapse(first), CHANGE_CHARS)}" if first.strip() else ""
        defined = f" (defines {', '.join(names)})" if names else ""
        self.changes.pop(path, None)
        self.changes[path] = (clock, f"Changed {path}{where}{at}{defined}{what}")


def output_paths(output: str) -> list[tuple[str, int]]:
    """Return the paths an output shows as touched, with a rank.

    Every file of a diff (rank 2), then up to ten paths of tracebacks and `path:line`
    hits (rank 1).
    """
    found: dict[str, int] = {}
    if "diff --git" in output or "+++ " in output:
        for match in _DIFF_PATH.finditer(output):
            found.setdefault(next(g for g in match.groups() if g), 2)
            if len(found) >= MAX_DIFF_PATHS:
                break
    window = head_tail(output)
    located: dict[str, int] = {}
    for pattern in (_TRACE_PATH, _LOCATED_PATH):
        for match in pattern.finditer(window):
            path = match.group(1)
            if path not in found and not is_noise_path(path):
                located.setdefault(path, 1)
    return [*found.items(), *list(located.items())[:MAX_OUTPUT_PATHS]]


def _diff_changes(
    output: str, command: str, patch: str = ""
) -> list[tuple[str, int | None, str, str]]:
    """Return the changes a diff shows.

    In an output, applied by a command's heredoc (`git apply`), or by an `apply_patch`
    envelope (`patch`, as a unified diff).
    """
    changes: list[tuple[str, int | None, str, str]] = []
    texts = [output] if "@@" in output else []
    if patch:
        texts.append(patch)
    elif command and "@@" in command and re.search(r"\b(?:git\s+apply|patch)\b", command):
        texts.append(command)
    for text in texts:
        seen: set[str] = set()
        for hunk in diff_hunks(text):
            if hunk.path in seen:
                continue
            seen.add(hunk.path)
            first = next((line for line in hunk.added if line.strip()), "")
            if not first and hunk.removed:
                first = "removed " + next((line for line in hunk.removed if line.strip()), "")
            changes.append((hunk.path, hunk.line, hunk_symbol(hunk.context), first))
    return changes


def _located_change(call: Call, lines: dict[int, str], output: str) -> tuple[int | None, str, str]:
    """Return the line, symbol and first new line of an edit made by a tool or `sed -i`."""
    first = next((line for line in call.replacement.split("\n") if line.strip()), "")
    indented = first
    number: int | None = None
    sed = _SED_SCRIPT.search(call.command) if call.command else None
    if sed is not None and not first:
        # A sed script's text carries no indentation: the line's own is used.
        first, indented = sed.group(5) or f"removed {sed.group(4)}", ""
        if sed.group(2):
            number = int(sed.group(2))
        else:
            old = sed.group(4).replace("\\", "")
            number = next((n for n, text in sorted(lines.items()) if old and old in text), None)
    original = next((line.strip() for line in call.original.split("\n") if line.strip()), "")
    if number is None and original:
        # An editor tool's old text, in the lines read before: where the edit starts.
        number = next((n for n, text in sorted(lines.items()) if text.strip() == original), None)
    if number is None and first.strip():
        shown = numbered_lines(output)
        wanted = first.strip()
        number = next((n for n, text in sorted(shown.items()) if text.strip() == wanted), None)
        lines = {**lines, **shown}
    symbol = symbol_at(lines, number, indented) if number is not None else ""
    return number, symbol, first


def _written_by_script(command: str) -> list[str]:
    """Return the files a script run from the shell opens for writing (`python - <<EOF`)."""
    if not command or ("open(" not in command and "write_text(" not in command):
        return []
    assigned = {m.group(1): m.group(3) for m in _ASSIGNED.finditer(command)}
    found: list[str] = []
    for match in _OPENED_FOR_WRITE.finditer(command):
        path = match.group(2) or match.group(5) or assigned.get(match.group(3) or "", "")
        if path and find_paths(path, lenient=True) and path not in found:
            found.append(path)
    return found


def _heredoc_body(command: str) -> str:
    """Return the text of a command's first heredoc (what `cat > f <<EOF` writes)."""
    if "<<" not in command:
        return ""
    lines = command.split("\n")
    match = _HEREDOC_START.search(lines[0])
    if match is None:
        return ""
    body: list[str] = []
    for line in lines[1:]:
        if line.strip() == match.group(2):
            break
        body.append(line)
    return "\n".join(body)


def _diff_lines(hunks: list[Hunk]) -> list[str]:
    """Return the changed lines of a diff to keep: a few of every file, in turn, each once.

    File by file in rounds (the first changed line of each file, then the second, ...),
    and within a file hunk by hunk in rounds, so that every file the diff changes is
    represented before any one is shown in full: a diff that reorders a long list (a
    sorted `AUTHORS`) does not fill the lines before the source change it comes with.
    """
    by_file: dict[str, list[list[str]]] = {}
    for hunk in hunks:
        by_file.setdefault(hunk.path, []).append(
            [
                f"{hunk.path}: {sign}{collapse(text)}"
                for sign, texts in (("-", hunk.removed), ("+", hunk.added))
                for text in texts
                if text.strip()
            ]
        )
    per_file = [in_rounds(file_hunks, DIFF_LINES_PER_HUNK) for file_hunks in by_file.values()]
    return list(dict.fromkeys(in_rounds(per_file, MAX_DIFF_LINES)))[:MAX_DIFF_LINES]
