"""Shortening one output within a token budget: head-and-tail cuts and noise squeezing.

- `truncate_head_tail_tokens` cuts a text to its first and last lines within a token
  budget, the token twin of the legacy `truncate_head_tail`.
- `squeeze_output` takes the noise out of a tool output (progress dots and bars,
  carriage-return redraws, repeated lines, long rules) and says what it took;
  `shorten_output` squeezes a tool result or a shell run and cuts it to its first and
  last lines within a token budget. The context loader uses them on bulky tool output
  before it drops anything else.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sessionstore._tokens import TokenCounter, estimate_tokens, message_tokens
from sessionstore.models import BashExecutionMessage, Message, TextContent, ToolResultMessage
from sessionstore.strategies._diff_cut import cut_output
from sessionstore.strategies._legacy import count_lines, truncate_head_tail
from sessionstore.summarizers._rule_cut import shorten_rules

__all__ = ["shorten_output", "squeeze_output", "truncate_head_tail_tokens"]


def _text_counter(counter: TokenCounter | None) -> Callable[[str], int]:
    return estimate_tokens if counter is None else counter.count_text


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")


def _with_text(message: ToolResultMessage, text: str) -> ToolResultMessage:
    return message.model_copy(update={"content": [TextContent(text=text)]})


def _only_text(message: ToolResultMessage) -> str | None:
    """Return the result's text when it holds text blocks only, else None."""
    if any(not isinstance(block, TextContent) for block in message.content):
        return None
    return message.text


# ── truncation ─────────────────────────────────────────────────────────────────


def _largest(fits: Callable[[int], bool], high: int, guess: int | None = None) -> int:
    """Return the largest k in [0, high] with fits(k), assuming fits is monotone; -1 if none.

    With a `guess` near the answer, the search gallops from it (1, 2, 4, ... away) before
    it halves: a few tries near the guess rather than tries of half the range and more,
    which for a long output's cut are as long as the output.
    """
    low, best = 0, -1
    if guess is not None and 0 <= guess <= high:
        step = 1
        if fits(guess):
            best = guess
            while best + step <= high and fits(best + step):
                best += step
                step *= 2
            low, high = best + 1, min(high, best + step - 1)
        else:
            high = guess - 1
            while guess - step >= 0 and not fits(guess - step):
                high = guess - step - 1
                step *= 2
            if guess - step >= 0:
                best = low = guess - step
                low += 1
    while low <= high:
        middle = (low + high) // 2
        if fits(middle):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best


_MARKER_TOKENS = 12
"""About what a cut's marker line costs (`[... 1234 lines truncated ...]`)."""


def truncate_head_tail_tokens(
    text: str,
    max_tokens: int,
    *,
    counter: TokenCounter | None = None,
    cut: Callable[[str, int], str] = truncate_head_tail,
) -> str:
    r"""Return `text` cut to its first and last lines so that it fits `max_tokens`.

    The line cut is `cut` (by default `truncate_head_tail`, the legacy level-1 cut, same
    marker; `cut_output` keeps a diff's changed lines) with the most lines that fit.
    When fewer than two lines would fit (one huge line of minified JSON), characters are
    cut instead, around `"\n\n[... {omitted} characters truncated ...]\n\n"`. A text
    that fits is returned as it is; when not even the marker fits, the result is empty.

    Raises:
        ValueError: `max_tokens` is negative.
    """
    _check_count("max_tokens", max_tokens)
    count = _text_counter(counter)
    total = count(text)
    if total <= max_tokens:
        return text
    lines = count_lines(text)
    # As many lines as the budget holds at the text's own tokens a line, less a marker.
    guess = (max_tokens - _MARKER_TOKENS) * lines // max(total, 1)
    best = _largest(lambda k: count(cut(text, k)) <= max_tokens, lines - 1, guess)
    if best >= 2:
        return cut(text, best)

    def by_chars(kept: int) -> str:
        head = kept // 2
        tail = kept - head
        omitted = len(text) - kept
        marker = f"\n\n[... {omitted} characters truncated ...]\n\n"
        return text[:head] + marker + (text[-tail:] if tail else "")

    chars = _largest(lambda k: count(by_chars(k)) <= max_tokens, len(text) - 1)
    return by_chars(chars) if chars >= 0 else ""


# ── squeezing ──────────────────────────────────────────────────────────────────

_PROGRESS_LINE = re.compile(r"^[.sFEx]{24,}$")
"""A line of test-runner progress marks (pytest, unittest: `....F..s`)."""
_PROGRESS_BAR = re.compile(r"(\d{1,3}(?:\.\d+)?\s?%|\d+/\d+)")
_BAR_CHARS = re.compile(r"[#=█▉▊▋▌▍▎▏━─>|\[\] ]{10,}")
_REPEAT_MIN = 3


def _is_bar(line: str) -> bool:
    return bool(_PROGRESS_BAR.search(line) and _BAR_CHARS.search(line))


def _progress_summary(line: str) -> str:
    counts = {mark: line.count(mark) for mark in ".sFEx" if mark in line}
    names = {".": "passed", "s": "skipped", "F": "failed", "E": "errors", "x": "xfailed"}
    told = ", ".join(f"{names[mark]} {count}" for mark, count in counts.items())
    return f"[progress marks: {told}]"


_LONG_OUTPUT_WARNING = re.compile(r"(<warning>\n?[^\n]*)\n.*?(</warning>)", re.DOTALL)
"""mini-swe-agent's warning before a long output's head and tail: its first line stays."""


def squeeze_output(text: str) -> str:
    """Return a tool output without its noise, saying in brackets what was taken out.

    - a carriage-return redraw keeps what was drawn last on its line;
    - a line of test progress marks (`....F..s`, 24 or more) becomes their tally;
    - a run of progress-bar lines (a percentage or `n/m` with a bar) keeps its last line;
    - a line repeated three or more times in a row is kept once, with the count;
    - a rule of one punctuation character (`-----`, `=====`) is cut to 8 characters;
    - a harness's warning that the output was too long (mini-swe-agent's `<warning>`
      before the output's head and tail) keeps its first line.

    A text without noise is returned as it is (the same object).
    """
    if len(text) < 200:
        return text
    original = text
    if "<output_head>" in text:
        text = _LONG_OUTPUT_WARNING.sub(r"\1\2", text, count=1)
    lines = text.split("\n")
    result: list[str] = []
    changed = text is not original
    index = 0
    while index < len(lines):
        line = lines[index]
        if "\r" in line.rstrip("\r"):
            line = line.rstrip("\r").rsplit("\r", 1)[-1]
            changed = True
        if _PROGRESS_LINE.match(line.strip()):
            line = _progress_summary(line.strip())
            changed = True
        elif _is_bar(line):
            end = index
            while end + 1 < len(lines) and _is_bar(lines[end + 1]):
                end += 1
            if end > index:
                line = f"[{end - index} progress lines]\n{lines[end]}"
                changed = True
                index = end
        shortened = shorten_rules(line)
        if shortened != line:
            line, changed = shortened, True
        repeats = 1
        while index + repeats < len(lines) and lines[index + repeats] == lines[index]:
            repeats += 1
        if repeats >= _REPEAT_MIN:
            result.append(f"{line}\n[the line above repeated {repeats - 1} more times]")
            index += repeats
            changed = True
            continue
        result.append(line)
        index += 1
    return "\n".join(result) if changed else text


def shorten_output(message: Message, max_tokens: int | None, *, squeezed: bool = False) -> Message:
    """Return a tool result or shell run with its output squeezed, then cut to `max_tokens`.

    The output (the text of a tool result that holds text only, or a shell run's output)
    is squeezed (`squeeze_output`); with `max_tokens`, it is then cut to its first and
    last lines so that the message costs at most about that many tokens
    (`truncate_head_tail_tokens`, which says how many lines it left out; a diff loses its
    unchanged lines first, `cut_output`). Any other
    message, or one with nothing to take out, is returned as it is. `squeezed`: the
    output is already squeezed (what `shorten_output(message, None)` returned), so only
    the cut is made.
    """
    if isinstance(message, ToolResultMessage):
        text = _only_text(message)
        if text is None:
            return message
        overhead = message_tokens(message) - estimate_tokens(text)
        output = _shortened_text(text, max_tokens, overhead, squeezed)
        return message if output is text else _with_text(message, output)
    if isinstance(message, BashExecutionMessage):
        overhead = message_tokens(message) - estimate_tokens(message.output)
        output = _shortened_text(message.output, max_tokens, overhead, squeezed)
        return (
            message if output is message.output else message.model_copy(update={"output": output})
        )
    return message


def _cut_by_lines(text: str, max_lines: int) -> str:
    """`cut_output` without looking for the middle's errors.

    A build tries many sizes on each of many outputs; reading each for its errors made
    a cut of a hundred long outputs several times slower.
    """
    return cut_output(text, max_lines, errors=False)


def _shortened_text(text: str, max_tokens: int | None, overhead: int, squeezed: bool) -> str:
    squeezed_text = text if squeezed else squeeze_output(text)
    if max_tokens is None:
        return squeezed_text
    room = max(max_tokens - overhead, 0)
    cut = truncate_head_tail_tokens(squeezed_text, room, cut=_cut_by_lines)
    return text if cut == text else cut
