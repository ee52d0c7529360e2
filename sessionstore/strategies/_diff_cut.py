"""Cutting a tool's output to a number of lines, keeping what a diff changed (pure).

The recent turns a block keeps have their tool output cut to `tool_output_max_lines`
lines, head and tail (`truncate_head_tail`, the seed's level 1). A unified diff cut that
way loses its middle: the changed lines of every file but the first and the last, which
are what the agent did (a submission's `git diff`, a `diff -u` of a fix). `cut_output`
cuts a diff by its unchanged context lines instead, those farthest from a change first;
the file and hunk headers and every `+`/`-` line stay, with the lines around the diff
(a harness's `<returncode>`). Only when those alone are over the limit does it cut their
middle, as `truncate_head_tail` does. Any other output is `truncate_head_tail`'s.
"""

from __future__ import annotations

import re

from sessionstore.strategies._legacy import count_lines, lines_cut_marker, truncate_head_tail

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


def cut_output(text: str, max_lines: int) -> str:
    r"""Return `text` cut to about `max_lines` lines, a diff by its unchanged lines first.

    A text of at most `max_lines` lines is returned as it is (the same object). A unified
    diff keeps its headers, its changed lines and the lines around it, and as many of
    its context lines as fit, nearest a change first, in their order; one line at its
    end, `[... N unchanged lines of the diff cut ...]`, says how many went. When what it
    keeps is still over `max_lines`, its middle is cut as `truncate_head_tail` cuts, with
    the same marker, which then counts every line left out. Any other text:
    `truncate_head_tail(text, max_lines)`.

    Raises:
        ValueError: `max_lines` is negative.
    """
    if max_lines < 0 or count_lines(text) <= max_lines:
        return truncate_head_tail(text, max_lines)  # refuses a negative count; else `text`
    lines = text.removesuffix("\n").split("\n")
    kinds = _kinds(lines)
    if kinds is None:
        return truncate_head_tail(text, max_lines)
    kept = [i for i, kind in enumerate(kinds) if kind != _CONTEXT]
    context = [i for i, kind in enumerate(kinds) if kind == _CONTEXT]
    room = max_lines - len(kept) - 1  # the marker's line
    if room < 0:  # the diff's own lines are over the limit: their middle goes
        head = max_lines // 2
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
