"""Cutting a tool's output to a number of lines, keeping what a diff changed (pure).

The recent turns a block keeps have their tool output cut to `tool_output_max_lines`
lines, head and tail (`truncate_head_tail`, the seed's level 1). A unified diff cut that
way loses its middle: the changed lines of every file but the first and the last, which
are what the agent did (a submission's `git diff`, a `diff -u` of a fix). `cut_output`
cuts a diff by its unchanged context lines instead, those farthest from a change first;
the file and hunk headers and every `+`/`-` line stay, with the lines around the diff
(a harness's `<returncode>`). When those alone are over the limit, every file's header
line stays and the changed lines of each file are kept in turn (its hunks' first lines,
then their second, ...): a submission that also adds thousands of generated lines
(a `build/` tree) still shows each file it changed and how. Only when the file headers
alone are over the limit is the middle cut, as `truncate_head_tail` cuts. Any other
output is cut head and tail too, but keeps the error lines of its middle in their place
(a chained traceback's cause, a long test run's `E` lines), up to a fifth of the lines;
a build's cut of bulky output, which tries many sizes, leaves them out (`errors=False`).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache

from sessionstore.strategies._legacy import count_lines, lines_cut_marker, truncate_head_tail
from sessionstore.summarizers._rounds import in_rounds

__all__ = ["cut_output"]

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_HEADERS = (
    "diff --git ",
    "--- ",
    "+++ ",
    "index ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "rename from",
    "rename to",
    "Binary files",
    "\\ No newline",
)
_CONTEXT, _KEEP, _CHANGED = 0, 1, 2


def _kinds(lines: list[str]) -> list[int] | None:
    """Each line's kind (`_CONTEXT`, `_KEEP`, `_CHANGED`), or None when no diff is there."""
    kinds: list[int] = []
    in_hunk = False
    for line in lines:
        if line.startswith("diff --git ") or _HUNK.match(line):
            in_hunk = bool(_HUNK.match(line))
            kinds.append(_KEEP)
        elif line.startswith(_HEADERS):
            kinds.append(_KEEP)
        elif in_hunk and line.startswith(("+", "-")):
            kinds.append(_CHANGED)
        elif in_hunk and (line.startswith(" ") or not line):
            kinds.append(_CONTEXT)
        else:  # not part of a hunk: the output around the diff
            in_hunk = False
            kinds.append(_KEEP)
    return kinds if _CHANGED in kinds else None


def cut_output(text: str, max_lines: int, *, errors: bool = True) -> str:
    r"""Return `text` cut to about `max_lines` lines, a diff by its unchanged lines first.

    A text of at most `max_lines` lines is returned as it is (the same object). A unified
    diff keeps its headers, its changed lines and the lines around it, and as many of
    its context lines as fit, nearest a change first, in their order; one line at its
    end, `[... N unchanged lines of the diff cut ...]`, says how many went. When what it
    keeps is still over `max_lines`, its middle is cut as `truncate_head_tail` cuts, with
    the same marker, which then counts every line left out. Any other text:
    `truncate_head_tail(text, max_lines)`, but with the error lines of the middle it
    would leave out kept in their place (`_head_tail_errors`) unless `errors` is False
    (a build's cut of bulky output, which tries many sizes on many outputs).

    Raises:
        ValueError: `max_lines` is negative.
    """
    if max_lines < 0 or count_lines(text) <= max_lines:
        return truncate_head_tail(text, max_lines)  # refuses a negative count; else `text`
    read = _read(text)
    lines, kinds = read.lines, read.kinds
    if kinds is None:
        return (
            _head_tail_errors(text, read, max_lines)
            if errors
            else truncate_head_tail(text, max_lines)
        )
    kept = [i for i, kind in enumerate(kinds) if kind != _CONTEXT]
    context = [i for i, kind in enumerate(kinds) if kind == _CONTEXT]
    room = max_lines - len(kept) - 1  # the marker's line
    if room < 0:  # the diff's own lines are over the limit
        chosen = _file_by_file(lines, kinds, max_lines - 1)
        if chosen is not None:
            shown = [lines[i] for i in sorted(chosen)]
            return "\n".join(
                [*shown, f"[... {len(lines) - len(chosen)} lines of the diff cut ...]"]
            )
        head = max_lines // 2  # not even a line a file: the middle goes
        tail = (
            [lines[i] for i in kept[len(kept) - (max_lines - head) :]] if max_lines > head else []
        )
        marker = lines_cut_marker(len(lines) - max_lines)
        return "\n".join(lines[i] for i in kept[:head]) + marker + "\n".join(tail)
    changed = [i for i, kind in enumerate(kinds) if kind == _CHANGED]
    # Context lines nearest a changed line stay first (ties: the earlier line).
    distance = _distances(len(lines), changed)
    chosen = set(sorted(context, key=lambda i: (distance[i], i))[:room])
    shown = [lines[i] for i in range(len(lines)) if kinds[i] != _CONTEXT or i in chosen]
    dropped = len(context) - len(chosen)
    return "\n".join([*shown, f"[... {dropped} unchanged lines of the diff cut ...]"])


ERROR_SHARE = 5
"""At most one line in this many of a cut output is an error line kept from its middle."""
ERROR_SCAN_LINES = 1_000
"""Error lines are looked for among the first and the last this many lines of an output
only: a cut of a huge log stays bounded."""


@dataclass(slots=True)
class _Read:
    """A text's lines, their kinds (None: not a diff) and, once asked, its error lines."""

    lines: list[str]
    kinds: list[int] | None
    found: tuple[int, ...] | None = None

    @property
    def errors(self) -> tuple[int, ...]:
        """The indexes of the error lines among the first and last `ERROR_SCAN_LINES`."""
        if self.found is None:
            # Imported here: only a cut that keeps errors reads them (`sessionstore context`
            # starts without the scanner).
            from sessionstore.summarizers._run_output import is_error_line

            count = len(self.lines)
            ends = {
                *range(min(count, ERROR_SCAN_LINES)),
                *range(max(0, count - ERROR_SCAN_LINES), count),
            }
            self.found = tuple(i for i in sorted(ends) if is_error_line(self.lines[i]))
        return self.found


@lru_cache(maxsize=32)
def _read(text: str) -> _Read:
    """`text` read once for the cuts tried on it (a token budget's tries, a build's caps)."""
    lines = text.removesuffix("\n").split("\n")
    return _Read(lines, _kinds(lines))


def _middle_errors(read: _Read, start: int, stop: int, share: int) -> list[int]:
    """Up to `share` error lines of `lines[start:stop]`, the first and the last in turn.

    Each line's text once.
    """
    inside = read.errors[bisect_left(read.errors, start) : bisect_left(read.errors, stop)]
    ends: list[list[int]] = []
    for indexes in (inside, inside[::-1]):
        found: dict[str, int] = {}
        for index in indexes:
            if len(found) == share:
                break
            found.setdefault(read.lines[index].strip(), index)
        ends.append(list(found.values()))
    texts: dict[str, int] = {}
    for index in in_rounds(ends):  # the first and the last in turn
        texts.setdefault(read.lines[index].strip(), index)
    return list(texts.values())[:share]


def _head_tail_errors(text: str, read: _Read, max_lines: int) -> str:
    """Cut a text (not a diff) to its first and last lines and the errors in between.

    `truncate_head_tail`'s cut, but the error lines of the middle it would leave out
    (`is_error_line`: the exception a chained traceback was caused by, pytest's `E`
    lines of a failure above its summary) stay in their place, up to one line in
    `ERROR_SHARE`, the first and the last of them in turn, each line's text once; the
    head and the tail give up their innermost lines for them. Each gap is said with
    `truncate_head_tail`'s marker. Without such lines: `truncate_head_tail`'s cut.
    """
    share = max_lines // ERROR_SHARE
    if share == 0:
        return truncate_head_tail(text, max_lines)
    count = len(read.lines)
    head = (max_lines - share) // 2
    middle = _middle_errors(read, head, count - (max_lines - share - head), share)
    if not middle:
        return truncate_head_tail(text, max_lines)
    # Fewer errors than the share: the head and the tail take the lines left over.
    head = (max_lines - len(middle)) // 2
    tail = max_lines - len(middle) - head
    kept = sorted({*range(head), *middle, *range(count - tail, count)})
    pieces: list[str] = []
    previous = -1
    for index in kept:
        if index > previous + 1:
            pieces.append(lines_cut_marker(index - previous - 1))
        elif pieces:
            pieces.append("\n")
        pieces.append(read.lines[index].removesuffix("\r"))
        previous = index
    return "".join(pieces)


FRAME_LINES = 3
"""The lines before a diff and after it kept first (a harness's `<returncode>`)."""


def _file_by_file(lines: list[str], kinds: list[int], limit: int) -> set[int] | None:
    """Choose at most `limit` of a diff's lines: each file's, then its changes in turn.

    First every file's header line (`diff --git`, or `--- ` where a diff has none) and
    the first and last `FRAME_LINES` lines around the diff; then, file by file in
    rounds, a change of each (a hunk's first change comes with its `@@` line; a file's
    hunks in rounds too; blank changed lines last); then the rest of the lines around
    the diff, first and last in turn, and the other header lines. Each step is taken
    whole while it fits, and the first that does not ends the choice, so a larger
    `limit` keeps a superset. None when the file headers alone are over `limit`.
    """
    files: list[list[list[int]]] = []  # a file's hunks, each its `@@` line and changes
    headers: list[int] = []
    frame: list[int] = []
    rest: list[int] = []
    in_file = False
    for i, (line, kind) in enumerate(zip(lines, kinds, strict=True)):
        opens = line.startswith("diff --git ") or (
            line.startswith("--- ")
            and lines[i + 1 : i + 2] != []
            and lines[i + 1].startswith("+++ ")
            and not (in_file and not files[-1])
        )
        if opens:
            files.append([])
            headers.append(i)
            in_file = True
        elif _HUNK.match(line):
            if not files:
                files.append([])
                headers.append(i)
            files[-1].append([i])
        elif kind == _CHANGED:
            if files[-1]:
                files[-1][-1].append(i)
            else:  # after a hunk's line that looked like a `--- ` header: it heads its own
                files[-1].append([i])
        elif kind == _KEEP and line.startswith(_HEADERS) and in_file:
            rest.append(i)
        elif kind == _KEEP:
            frame.append(i)
            in_file = False
    if len(headers) > limit:
        return None
    frame_order = [i for pair in zip(frame, reversed(frame), strict=True) for i in pair]
    frame_order = list(dict.fromkeys(frame_order[: len(frame)]))
    steps: list[list[int]] = [[i] for i in headers]
    steps += [[i] for i in frame_order[: 2 * FRAME_LINES]]
    per_file: list[list[list[int]]] = []
    for hunks in files:
        picks: list[list[list[int]]] = []
        for header, *changes in hunks:
            # A blank `+` or `-` line shows nothing of the change: it comes last.
            changes.sort(key=lambda i: not lines[i][1:].strip())
            picks.append([[header, *changes[:1]], *([i] for i in changes[1:])])
        per_file.append(in_rounds(picks))
    steps += in_rounds(per_file)
    steps += [[i] for i in frame_order[2 * FRAME_LINES :]]
    steps += [[i] for i in rest]
    chosen: set[int] = set()
    for step in steps:
        if len(chosen) + len(step) > limit:
            break
        chosen.update(step)
    return chosen


def _distances(count: int, marks: list[int]) -> list[int]:
    """Each index's distance to the nearest of `marks` (two passes, no search)."""
    marked = set(marks)
    far = 2 * count + 2
    distance = [far] * count
    last = -far
    for i in range(count):
        if i in marked:
            last = i
        distance[i] = i - last
    last = far + count
    for i in range(count - 1, -1, -1):
        if i in marked:
            last = i
        distance[i] = min(distance[i], last - i)
    return distance
