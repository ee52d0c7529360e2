"""The standing instructions of a request: the harness's boilerplate around its task (pure).

Agent harnesses send the task inside a template: the issue or question, then (or before
it) instructions that are the same for every task: how to respond, the commands, notes,
tips, a worked example. When a budget leaves no room beside such a request, its standing
instructions may be shortened; its task text never is.

A part of a request is a standing instruction when it is

- a section whose heading names instructions: an upper-case label that opens a paragraph
  (`INSTRUCTIONS:`, `IMPORTANT TIPS:`, `NOTE ABOUT THE EDIT COMMAND: ...`) with the
  paragraphs that continue it (indented, or list items), a block in such a tag
  (`<instructions>` ... `</instructions>`, `<IMPORTANT>`; the tags stay), or a Markdown
  heading (`## Instructions`, `## Guidelines`: fewer words count, since a task's own
  headings say `Notes` or `Examples`) with what follows up to the next heading of its
  level, unless upper-case labels structure the text;
- or a paragraph the session's system prompt holds too, word for word.

Anything else is the task, and a request with too little else has no standing part: it
is all task. `shorten_standing` keeps the task text verbatim and the leading whole
sentences of the standing parts that fit, and says where and how many it left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "STANDING_LEFT_OUT",
    "Request",
    "split_request",
]

STANDING_LEFT_OUT = "[… {count} sentence(s) of standing instructions left out to fit the budget]"
"""What stands where a request's standing instructions were shortened."""

MIN_TASK_CHARS = 40
"""A request with fewer characters of task text than this is all task."""
MIN_SHARED_CHARS = 80
"""A paragraph the system prompt holds too is standing when it is at least this long."""

_STANDING_WORDS = frozenset(
    {
        "instruction", "instructions", "tip", "tips", "rule", "rules", "guideline",
        "guidelines", "format", "demonstration", "reminder", "reminders", "workflow",
        "boundaries",
    }
)  # fmt: skip
"""Words of a heading that names a harness's standing instructions."""
_LABEL_WORDS = _STANDING_WORDS | {
    "note", "notes", "important", "command", "commands", "example", "examples", "remember",
    "usage",
}  # fmt: skip
"""The same for an upper-case label or a tag, which a task statement rarely holds."""

_LABEL = re.compile(r"[ \t]*([A-Z][A-Z0-9]*(?:[ _'/-]+[A-Z0-9]+)*)[ \t]*:(?!//)")
_HEADING = re.compile(r"[ \t]{0,3}(#{1,6})[ \t]+(\S.*?)[ \t#]*$")
_OPEN_TAG = re.compile(r"[ \t]*<([A-Za-z][\w-]*)>[ \t]*$")
_FENCE = re.compile(r"[ \t]*(```|~~~)")
_CONTINUES = re.compile(r"[ \t]+\S|(?:\d+[.)]|[-*•])[ \t]")
"""A paragraph that goes on a labeled section: indented, or a list item."""
_SENTENCE_END = re.compile(r"(?<=[.!?:;])[ \t]+(?=\S)|\n")


def _is_standing_label(label: str, words: frozenset[str] = _LABEL_WORDS) -> bool:
    return bool({word.lower() for word in re.split(r"[^A-Za-z]+", label) if word} & words)


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    end: int
    standing: bool


def _lines(text: str) -> list[tuple[int, int]]:
    """Return (start, end) of each line, the end before its newline."""
    spans: list[tuple[int, int]] = []
    start = 0
    for line in text.split("\n"):
        spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def _standing_ranges(text: str, shared: str) -> list[tuple[int, int]]:
    """Return the (start, end) character ranges of the standing sections, in order."""
    lines = _lines(text)
    ranges: list[tuple[int, int]] = []
    section: tuple[int, int] | None = None
    """(first line, heading level; 0 for a label) of the standing section being read."""
    labeled = False
    """Upper-case labels structure the text: Markdown headings are then part of a section."""

    def close(end_line: int) -> None:
        nonlocal section
        if section is not None and end_line > section[0]:
            first, last = lines[section[0]][0], lines[end_line - 1][1]
            last = first + len(text[first:last].rstrip())
            if last > first:
                ranges.append((first, last))
        section = None

    index = 0
    in_fence = False
    previous_blank = True
    while index < len(lines):
        line = text[slice(*lines[index])]
        blank = not line.strip()
        if _FENCE.match(line) or in_fence:
            in_fence = in_fence != bool(_FENCE.match(line))
            previous_blank = blank
            index += 1
            continue
        tag = _OPEN_TAG.fullmatch(line)
        stop = None
        if tag is not None:
            closing = f"</{tag.group(1)}>"
            after = range(index + 1, len(lines))
            stop = next((i for i in after if text[slice(*lines[i])].strip() == closing), None)
        label = _LABEL.match(line)
        heading = _HEADING.fullmatch(line)
        if tag is not None and stop is not None:
            # A block in tags is one section, whatever it holds; the tags stay.
            close(index)
            if _is_standing_label(tag.group(1)) and stop > index + 1:
                section = (index + 1, 0)
                close(stop)
            index = stop + 1
            previous_blank = False
            continue
        if label is not None and previous_blank and (section is None or section[1] == 0):
            # A label starts a paragraph; elsewhere it is a line of the text (a log's
            # `WARNING: ...`).
            close(index)
            labeled = True
            if _is_standing_label(label.group(1)):
                section = (index, 0)
        elif label is not None and section is None:
            labeled = True
        elif (
            heading is not None
            and not labeled
            and (section is None or len(heading.group(1)) <= section[1])
        ):
            close(index)
            if _is_standing_label(heading.group(2), _STANDING_WORDS):
                section = (index, len(heading.group(1)))
        elif (
            section is not None
            and section[1] == 0
            and previous_blank
            and not blank
            and not _CONTINUES.match(line)
        ):
            close(index)
        previous_blank = blank
        index += 1
    close(len(lines))
    if shared:
        ranges += _shared_paragraphs(text, shared)
    return _merged(text, ranges)


def _normalized(text: str) -> str:
    return " ".join(text.split())


def _shared_paragraphs(text: str, shared: str) -> list[tuple[int, int]]:
    """Return the paragraphs of `text` the system prompt holds too, word for word."""
    haystack = _normalized(shared)
    ranges: list[tuple[int, int]] = []
    for match in re.finditer(r"\S(?:.|\n(?![ \t]*\n))*", text):
        paragraph = _normalized(match.group())
        if len(paragraph) >= MIN_SHARED_CHARS and paragraph in haystack:
            ranges.append((match.start(), match.end()))
    return ranges


def _merged(text: str, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort ranges and join those only white space keeps apart."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and not text[merged[-1][1] : start].strip():
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _sentence_ends(text: str, start: int, end: int) -> list[int]:
    """Return where each whole sentence of `text[start:end]` ends (a fenced block is one)."""
    ends: list[int] = []
    in_fence = False
    for match in _SENTENCE_END.finditer(text, start, end):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if match.group() == "\n" and _FENCE.match(text, line_start):
            in_fence = not in_fence
            if in_fence:
                continue
        previous = ends[-1] if ends else start
        if not in_fence and text[previous : match.start()].strip():
            ends.append(match.start())
    if not ends or ends[-1] < end:
        ends.append(end)
    return ends


@dataclass(frozen=True, slots=True)
class Request:
    """A request's text split into task text and standing instructions."""

    text: str
    spans: tuple[_Span, ...]
    sentence_ends: tuple[tuple[int, ...], ...]
    """Per standing span (in order), where each of its sentences ends."""

    @property
    def has_standing(self) -> bool:
        """True when there is a standing part to shorten."""
        return any(span.standing for span in self.spans)

    @property
    def sentences(self) -> int:
        """How many sentences the standing parts hold."""
        return sum(len(ends) for ends in self.sentence_ends)

    @property
    def task_parts(self) -> list[str]:
        """The task text, part by part: what is never cut."""
        return [self.text[s.start : s.end] for s in self.spans if not s.standing]

    def keeping(self, count: int) -> str:
        """Return the text with the first `count` standing sentences kept, the rest marked."""
        if count >= self.sentences:
            return self.text
        parts: list[str] = []
        left = count
        standing = 0
        for span in self.spans:
            if not span.standing:
                parts.append(self.text[span.start : span.end])
                continue
            ends = self.sentence_ends[standing]
            standing += 1
            kept = min(left, len(ends))
            left -= kept
            if kept == len(ends):
                parts.append(self.text[span.start : span.end])
                continue
            head = self.text[span.start : ends[kept - 1]].rstrip() if kept else ""
            marker = STANDING_LEFT_OUT.format(count=len(ends) - kept)
            parts.append(f"{head}\n{marker}" if head else marker)
        return "".join(parts)

    def shorten(self, fits: Callable[[str], bool]) -> str | None:
        """Return the text keeping the most leading standing sentences that `fits`, or None.

        None when not even the task text with every standing sentence left out fits.
        """
        if fits(self.text):
            return self.text
        low, high = 0, self.sentences - 1
        if not fits(self.keeping(low)):
            return None
        while low < high:
            middle = (low + high + 1) // 2
            if fits(self.keeping(middle)):
                low = middle
            else:
                high = middle - 1
        return self.keeping(low)


def split_request(text: str, *, shared: Sequence[str] = ()) -> Request:
    """Split a request's text into its task text and its standing instructions.

    Args:
        text: The request's text.
        shared: Texts of the session's system prompt: a paragraph they hold too is
            standing.
    """
    # Standing text before any task text stays: a shortened request always starts as the
    # request does (the marker comes after a kept part, never first).
    ranges = [r for r in _standing_ranges(text, "\n\n".join(shared)) if text[: r[0]].strip()]
    spans: list[_Span] = []
    at = 0
    for start, end in ranges:
        if start > at:
            spans.append(_Span(at, start, False))
        spans.append(_Span(start, end, True))
        at = end
    if at < len(text):
        spans.append(_Span(at, len(text), False))
    task = sum(len(text[s.start : s.end].strip()) for s in spans if not s.standing)
    if task < MIN_TASK_CHARS or not ranges:
        return Request(text, (_Span(0, len(text), False),), ())
    ends = tuple(tuple(_sentence_ends(text, s.start, s.end)) for s in spans if s.standing)
    return Request(text, tuple(spans), ends)
