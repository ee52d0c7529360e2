"""Cutting a handoff's task snapshot to fit (pure): `cut_task`, for `_fit`'s stages.

A task is the user's request, then their later replies (`FOLLOW_UP` lines). The
statement's bulky fenced blocks (a pasted `pip list`, a log) lose their middle lines
first (`_cut_blocks`); then a harness's standing instructions (`<instructions>`,
`INSTRUCTIONS:`), by whole lines, their rules last and their first prohibitions (`DO NOT
MODIFY: Tests`) not at all (`_cut_lines`); then the whole block but its tail (how to
submit) and those prohibitions, which go too rather than the statement's opening, and
then that tail, rather than the opening; then the older replies, whole; then the middle
of the request; the latest reply last.
"""

from __future__ import annotations

import re

from sessionstore.summarizers._handoff import FOLLOW_UP
from sessionstore.summarizers._harness import (
    example_spans,
    instructions_start,
)
from sessionstore.summarizers._rule_cut import shorten_rules
from sessionstore.summarizers._said import HARNESS_COMPLAINT, is_constraint
from sessionstore.summarizers._scan import FENCE

__all__ = ["cut_task", "older_replies_saving"]


def _cut_middle(text: str, remove: int) -> str:
    """Return `text` without `remove` characters from its middle (two thirds of the rest first)."""
    if remove <= 0 or not text:
        return text
    # A cut shorter than its marker and line breaks would lengthen the text: it cuts more.
    least = len(f"[… {len(text)} characters cut …]") + 3
    if least >= len(text):
        return text  # nothing it could cut would make it shorter
    remove = min(len(text), max(remove, least))
    marker = f"[… {remove} characters cut …]"
    keep = len(text) - remove
    if keep == 0:
        return marker
    if keep < HEAD_ONLY_MARKERS * len(marker):
        # So little is left that a head, a marker and a tail would say nothing: the
        # opening says what the text is about.
        return text[:keep].rstrip() + "…"
    head = (keep * 2 + 2) // 3
    tail = keep - head
    return (
        f"{text[:head]}\n{marker}\n{text[len(text) - tail :]}"
        if tail
        else f"{text[:head]}\n{marker}"
    )


SHORT_REQUEST_CHARS = 160
"""A request this short is kept whole over the middle of the user's replies after it."""
HEAD_ONLY_MARKERS = 3
"""A text cut to less than this many of its marker's length keeps its opening alone."""
KEPT_REPLY_CHARS = 80
"""What a cut keeps of the replies after a short request (their head and tail)."""
INSTRUCTIONS_TAIL_CHARS = 320
"""The end of a harness's standing instructions (how to submit) kept with the statement."""
_INSTRUCTIONS_MARKER = "[… {} characters of the harness's standing instructions cut …]"
_GAP = "[…]"
"""What stands for lines cut from standing instructions that keep their rules."""
_HEADING = re.compile(r"^\s*(?:#|</?\w+>\s*$|\*\*[^*]+\*\*:?\s*$)")


def _instruction_units(body: str) -> list[tuple[str, int]]:
    """Split standing instructions into units of whole lines, each with how long it stays.

    An example block or a fenced block is one unit and goes first (0), then a line of
    prose and a heading over no rule (1), then a line with inline code (a command or a
    name to use) and a heading over a rule (2), then a line that states a rule
    (`is_constraint`: must, do not, only, never...; 3). The first line (what opens the
    instructions) stays (4). A blank line goes with the unit before it.
    """
    spans = example_spans(body)
    units: list[tuple[str, int]] = []
    heading = -1  # the unit of the last heading
    offset = 0
    span = 0
    block_end = -1
    for line in body.splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        while span < len(spans) and spans[span][1] <= start:
            span += 1
        in_block = span < len(spans) and spans[span][0] < offset
        if units and (not line.strip() or (in_block and start < block_end)):
            units[-1] = (units[-1][0] + line, units[-1][1])
            continue
        if in_block:
            block_end = spans[span][1]
            rank = 0
        elif not units:
            rank = 4
        elif _HEADING.match(line):
            heading, rank = len(units), 1
        elif is_constraint(line.strip().lstrip("-*•0123456789. ")):
            rank = 3
            if heading >= 0:  # the heading over a rule stays with it
                units[heading] = (units[heading][0], 2)
        else:
            rank = 2 if "`" in line else 1  # inline code: a command, a name to use
        units.append((line, rank))
    return units


def _cut_lines(body: str, remove: int) -> str | None:
    """Return standing instructions with at least `remove` characters of whole lines cut.

    The units of `_instruction_units` go in their order (the later first within a kind),
    each run of them cut replaced by `_GAP`: the examples, then the prose, the lines with
    inline code and the headings over rules, and the rules last. None when cutting all
    but the first line and the prohibitions (`_kept_prohibitions`) is not enough.
    """
    units = _instruction_units(body)
    kept = _kept_prohibitions(units)
    order = sorted(range(len(units)), key=lambda i: (units[i][1], -i))
    order = [i for i in order if units[i][1] < 4 and i not in kept]
    gone: set[int] = set()
    removed = 0
    for index in order:
        gone.add(index)
        removed += len(units[index][0])
        if removed - len(gone) * (len(_GAP) + 1) < remove:
            continue  # at most one gap a unit: not enough yet
        text = _render_units(units, gone)
        if len(body) - len(text) >= remove:
            return text
    return None


def _render_units(units: list[tuple[str, int]], gone: set[int]) -> str:
    parts: list[str] = []
    for index, (text, _) in enumerate(units):
        if index not in gone:
            parts.append(text)
        elif index == 0 or index - 1 not in gone:
            parts.append(f"{_GAP}\n")
    return "".join(parts)


def _cut_instructions(request: str, remove: int) -> tuple[str, int]:
    """Return the request with up to `remove` characters of its standing instructions cut.

    A harness's task statement is the issue, then instructions that every task repeats
    (`<instructions>`, `INSTRUCTIONS:`): their examples go first, then their prose and
    headings, keeping the lines that state rules (`_cut_lines`) and their tail (how to
    submit, the last `INSTRUCTIONS_TAIL_CHARS` in whole lines); then all but that tail,
    before the statement itself is cut (in its middle). That tail goes too, and the
    prohibitions before it, when the statement would otherwise be cut into its opening
    (the first `KEPT_HEAD_CHARS` characters: what the task is). Returns the text and how
    many characters are left to cut.
    """
    start = instructions_start(request)
    if start is None:
        return request, remove
    block = request[start:]
    tail = min(INSTRUCTIONS_TAIL_CHARS, len(block))
    body_end = block.rfind("\n", 0, len(block) - tail) + 1
    for start_of, end_of in example_spans(block):  # the tail starts after a block, not in it
        if start_of < body_end < end_of:
            after = block.find("\n", end_of)
            body_end = len(block) if after < 0 else after + 1
    if body_end == 0:  # one line, or no more than the tail: cut with the statement
        return request, remove
    if remove < body_end:
        body = _cut_lines(block[:body_end], remove)
        if body is not None:
            return request[:start] + body + block[body_end:], 0
    # Their last lines (how to finish, how to submit) stay with the statement, and so do
    # their first prohibitions (`DO NOT MODIFY: Tests`), what the agent must not do, unless
    # the statement would be cut into its opening for them (its middle goes first: two
    # thirds of what is left of it are its head): the prohibitions go first, then the end.
    end = f"\n{block[body_end:].lstrip()}" if body_end < len(block) else ""

    def cut_to_end(rules: str, kept: str) -> tuple[str, int]:
        marker = _INSTRUCTIONS_MARKER.format((body_end if kept else len(block)) - len(rules))
        cut = f"{request[:start].rstrip()}\n{marker}\n{rules}".rstrip("\n") + kept
        return cut, max(0, remove - (len(request) - len(cut)))

    def into_opening(left: int) -> bool:
        return left > 0 and 2 * (start - left) < 3 * KEPT_HEAD_CHARS

    cut, left = cut_to_end(_prohibitions(block[:body_end]), end)
    if into_opening(left):
        cut, left = cut_to_end("", end)
    if into_opening(left) and end:
        cut, left = cut_to_end("", "")
    return cut, left


PROHIBITION_CHARS = 200
"""The standing instructions' prohibitions kept when all the rest of them but their end is cut."""
_PROHIBITION = re.compile(
    r"\b(?:do not|don'?t|never|must not|mustn'?t|shall not|may not)\b", re.IGNORECASE
)
_SHOUTED = re.compile(r"\b(?:DO NOT|DON'?T|NEVER|MUST NOT)\b")


def _kept_prohibitions(units: list[tuple[str, int]]) -> set[int]:
    """Return the units that forbid something, up to `PROHIBITION_CHARS` of them.

    A rule's line (`is_constraint`) that says what not to do; a shouted one (`DO NOT`,
    `NEVER`) first, then in their order. They stay when every other line but the first
    has gone.
    """
    found = [
        index for index, (line, rank) in enumerate(units) if rank == 3 and _PROHIBITION.search(line)
    ]
    found.sort(key=lambda index: (_SHOUTED.search(units[index][0]) is None, index))
    chosen: set[int] = set()
    room = PROHIBITION_CHARS
    for index in found:
        size = len(units[index][0].strip()) + 1
        if size <= room:
            chosen.add(index)
            room -= size
    return chosen


def _prohibitions(body: str) -> str:
    """Return the kept prohibitions of `body`, one line each, in their order ("" if none)."""
    units = _instruction_units(body)
    return "".join(units[index][0].strip() + "\n" for index in sorted(_kept_prohibitions(units)))


_CUT_INSTRUCTIONS = re.compile(
    "^" + re.escape(_INSTRUCTIONS_MARKER).replace(re.escape("{}"), r"\d+"), re.MULTILINE
)


def _cut_statement(request: str, remove: int) -> str:
    """Cut `remove` characters from the middle of the request's statement.

    What is left of a harness's standing instructions after it (their marker and their
    tail: how to submit) stays, unless the statement alone is not enough.
    """
    start = instructions_start(request)
    if start is None:  # cut to their marker and tail: by this cut, or by an earlier one
        # (a stored digest re-fitted by a build): found by the marker, not by the caller
        found = _CUT_INSTRUCTIONS.search(request)
        start = None if found is None else found.start()
    if start is not None and 0 < remove < start:
        return _cut_middle(request[:start], remove) + request[start:]
    return _cut_middle(request, remove)


KEPT_HEAD_CHARS = 300
"""The statement's first characters (what the task is) are never in a block's cut."""
BLOCK_HEAD_LINES = 6
BLOCK_TAIL_LINES = 3
"""A bulky block of the statement keeps its first and last lines (a command and its
first rows, the end of a log: where an error is)."""
_BLOCK_MARKER = "[… {} lines cut …]"


def _cut_blocks(request: str, remove: int) -> tuple[str, int]:
    """Cut up to `remove` characters from the middle of the statement's bulky blocks.

    A report pastes listings into its fenced blocks (`pip list`, a log, a long
    traceback): many characters that say little, before the statement's prose and the
    harness's rules. A block of more than `BLOCK_HEAD_LINES` + `BLOCK_TAIL_LINES` + 1
    lines loses lines from its middle outwards, the longest block first, each run cut
    one marker line. Returns the text and how many characters are left to cut.
    """
    end = instructions_start(request)
    statement = request if end is None else request[:end]
    cuts: list[tuple[int, int, str]] = []
    for start, stop in sorted(
        (m.span() for m in FENCE.finditer(statement)), key=lambda span: span[0] - span[1]
    ):
        if remove <= 0:
            break
        shortened = _cut_block_lines(statement[start:stop], remove, KEPT_HEAD_CHARS - start)
        if shortened is not None:
            cuts.append((start, stop, shortened))
            remove -= stop - start - len(shortened)
    for start, stop, shortened in sorted(cuts, reverse=True):
        statement = statement[:start] + shortened + statement[stop:]
    return (statement if end is None else statement + request[end:]), max(0, remove)


def _marker_cost(lines: int) -> int:
    """The characters the marker line of `lines` lines cut adds (with its newline)."""
    return len(_BLOCK_MARKER.format(lines)) + 1


def _cut_block_lines(block: str, remove: int, kept_chars: int = 0) -> str | None:
    """Return a fenced block without the fewest middle lines that make `remove`, or None.

    Its lines that begin in its first `kept_chars` characters stay.
    """
    lines = block.split("\n")
    # The fence lines stay: the opening one with the first lines, the closing with the last.
    low, high = 1 + BLOCK_HEAD_LINES, len(lines) - 1 - BLOCK_TAIL_LINES
    offset = 0
    for index, line in enumerate(lines):
        if offset >= kept_chars:
            break
        low = max(low, index + 1)
        offset += len(line) + 1
    if high - low < 2:
        return None
    middle = left = right = (low + high) // 2
    saved = 0
    while saved - _marker_cost(right - left) < remove:
        if right < high and (right - middle <= middle - left or left <= low):
            saved += len(lines[right]) + 1
            right += 1
        elif left > low:
            left -= 1
            saved += len(lines[left]) + 1
        else:
            break  # all of its middle: the rest is cut elsewhere
    if saved <= _marker_cost(right - left):
        return None  # its middle is shorter than the marker
    return "\n".join([*lines[:left], _BLOCK_MARKER.format(right - left), *lines[right:]])


def _reply_marker(count: int) -> str:
    return f"[… {count} earlier {'reply' if count == 1 else 'replies'} of the user cut …]"


def older_replies_saving(task: str) -> int:
    """Return the characters `cut_task` saves by dropping every later reply but the latest.

    0 when the task shows fewer than two replies: a cut of at most this much never
    reaches the request's own words (what goes before the replies only saves more).
    """
    replies = [line for line in task.split("\n") if line.startswith(FOLLOW_UP)]
    older = len(replies) - 1
    if older < 1:
        return 0
    saved = sum(len(reply) + 1 for reply in replies[:older]) - len(_reply_marker(older)) - 1
    return max(0, saved)


def _cut_replies(replies: list[str], remove: int) -> tuple[list[str], int]:
    """Drop the oldest replies, whole, for `remove` characters; the latest one stays.

    Returns the replies left (a marker first, for those dropped) and what is left to cut.
    """
    for count in range(1, len(replies)):
        saved = sum(len(reply) + 1 for reply in replies[:count]) - len(_reply_marker(count)) - 1
        if saved >= remove or count == len(replies) - 1:
            if saved <= 0:
                return replies, remove
            return [_reply_marker(count), *replies[count:]], remove - saved
    return replies, remove


def _without_complaints(replies: list[str], remove: int) -> tuple[list[str], int]:
    """Leave out a harness's complaints about a reply's format, oldest first, as needed.

    `Please always provide EXACTLY ONE action in triple backticks` is kept among the
    user's later replies in case it is the last thing said, but it is not the user's word:
    it goes before anything of the task. Returns the replies and what is left to cut.
    """
    kept = list(replies)
    for reply in replies:
        if remove <= 0:
            break
        if HARNESS_COMPLAINT.search(reply.removeprefix(FOLLOW_UP)):
            kept.remove(reply)
            remove -= len(reply) + 1
    return kept, remove


def cut_task(task: str, remove: int) -> str:
    """Return the task with `remove` characters cut: instructions, older replies, request.

    Long rules (`=====`) are cut to eight characters first (`shorten_rules`), a
    harness's complaints about a reply's format among the later replies go, then the
    statement's bulky fenced blocks lose their middle lines (`_cut_blocks`), a harness's
    standing instructions are cut (`_cut_instructions`), then the
    user's older later replies, whole, oldest first (one marker says how many went),
    then the middle of the request. The latest reply is the user's latest words: it is
    cut only once the request itself is gone, or when the request is shorter than
    `SHORT_REQUEST_CHARS` (its marker would cost as much) and the replies cover the cut
    with `KEPT_REPLY_CHARS` of them left. A conversation whose user answers the
    assistant's questions (a customer-service agent's) has long replies; a short request
    cut by a few characters in its middle would read as nothing.
    """
    if remove <= 0:
        return task
    # A long rule (`=====` around a pasted test run) says as much with eight characters.
    short = shorten_rules(task)
    remove -= len(task) - len(short)
    if remove <= 0:
        return short
    lines = short.split("\n")
    replies = [line for line in lines if line.startswith(FOLLOW_UP)]
    request = "\n".join(line for line in lines if not line.startswith(FOLLOW_UP))
    replies, remove = _without_complaints(replies, remove)
    if remove <= 0:
        return "\n".join([request, *replies])
    request, remove = _cut_blocks(request, remove)
    if remove > 0:
        request, remove = _cut_instructions(request, remove)
    if remove > 0 and len(replies) > 1:
        replies, remove = _cut_replies(replies, remove)
    if remove <= 0:
        return "\n".join([request, *replies])
    if not replies or remove < len(request):
        return "\n".join([_cut_statement(request, remove), *replies])
    rest = "\n".join(replies)
    if len(request) <= SHORT_REQUEST_CHARS and remove < len(rest) - KEPT_REPLY_CHARS:
        # A request this short would leave only a marker as long as itself: it stays
        # whole, and the middle of the replies goes instead (their head and tail kept).
        return "\n".join([request, _cut_middle(rest, remove)])
    remove -= len(request)
    if len(replies) > 1 and not replies[0].startswith(FOLLOW_UP):  # the marker of those cut
        remove -= len(replies.pop(0)) + 1
    rest = "\n".join(replies)
    if remove <= 0:
        return "\n".join([_cut_middle(request, len(request)), rest])
    # The replies are cut too: the request's place is marked, no more (a count of the
    # characters cut would cost what is left of the replies).
    return "\n".join([_GAP, _cut_middle(rest, remove - len(_GAP) - 1)])
