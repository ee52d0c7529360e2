"""A harness's framing of a task (pure): its standing instructions, examples, demonstrations.

A harness (SWE-agent, mini-swe-agent, ...) wraps the task statement in instructions every
task repeats, with examples whose placeholders (`MY_ENV_VAR`, `your_command_here`) are
not facts of the session, and may show a worked demonstration before the task.
"""

from __future__ import annotations

import re

from sessionstore.summarizers._scan import FENCE

__all__ = [
    "example_spans",
    "instructions_start",
    "is_demonstration",
    "is_placeholder",
    "statement_part",
    "without_examples",
]


_DEMONSTRATION = re.compile(
    r"^\W*(?:here is|here's|below is|the following is)\s+an?\s+(?:\w+\s+)?"
    r"(?:demonstration|example (?:of|trajectory|run|session|interaction|conversation))"
    r"|-{2,}\s*(?:END OF\s+)?DEMONSTRATION\s*-{2,}",
    re.IGNORECASE | re.MULTILINE,
)


def is_demonstration(text: str) -> bool:
    """Return True for a worked demonstration a harness shows the agent (not its task).

    A message that opens by saying it is a demonstration or an example run (SWE-agent's
    `Here is a demonstration of how to correctly accomplish this task.`), or that holds
    `--- DEMONSTRATION ---` markers near its start or end.
    """
    return (
        _DEMONSTRATION.search(text[:400]) is not None
        or _DEMONSTRATION.search(text[-400:]) is not None
    )


_PLACEHOLDER = re.compile(
    r"(?:^|[/_.\-\s<])(?:my|your|some|example|sample|placeholder|dummy|foo|bar|baz|xxx)"
    r"(?:[/_.\-\s>]|$)"
    r"|path/to/|/to/your|_here\b|<\w+>|^(?:file|filename|newfile|old_string|new_string|command"
    r"|action|value|name)(?:\.\w+)?$",
    re.IGNORECASE,
)
_EXAMPLE_BLOCK = re.compile(
    r"<(\w*example\w*)>.*?</\1>"
    r"|^[^\n]*\b(?:[Ee]xamples?|e\.g\.|[Ff]or instance|[Ff]ormat)\b[^\n]*:[ \t]*\n+```.*?```",
    re.DOTALL | re.MULTILINE,
)


def is_placeholder(token: str) -> bool:
    """Return True for a value an instruction's example uses, not a fact of the session.

    `MY_ENV_VAR`, `your_command_here`, `/path/to/working/dir`, `example.py`, `filename.py`.
    """
    return _PLACEHOLDER.search(token) is not None


INSTRUCTIONS = re.compile(
    r"^[ \t]*(?:<instructions>|INSTRUCTIONS:|#{1,3} *(?:Task )?Instructions\b"
    r"|-{3,} *INSTRUCTIONS *-{3,})",
    re.IGNORECASE | re.MULTILINE,
)


def instructions_start(text: str) -> int | None:
    """Return where a task statement's standing instructions begin, or None.

    A harness's task statement is the issue first, then instructions every task repeats
    (`<instructions>`, `INSTRUCTIONS:`, `# Task Instructions`); a heading with less than
    `MIN_STATEMENT_CHARS` of text before it opens the statement itself and does not count.
    """
    match = INSTRUCTIONS.search(text)
    if match is None or len(text[: match.start()].strip()) < MIN_STATEMENT_CHARS:
        return None
    return match.start()


MIN_STATEMENT_CHARS = 40
"""A task statement before standing instructions has at least this much text."""


def statement_part(text: str) -> str:
    """Return a task statement without its standing instructions (see `instructions_start`)."""
    start = instructions_start(text)
    return text if start is None else text[:start]


def example_spans(text: str) -> list[tuple[int, int]]:
    """Return where `text`'s example blocks and fenced code lie, as sorted (start, end) spans."""
    spans = [m.span() for pattern in (_EXAMPLE_BLOCK, FENCE) for m in pattern.finditer(text)]
    return sorted(spans)


def without_examples(text: str) -> str:
    """Return `text` without its example blocks (`<format_example>...`, `Example:` + code)."""
    return _EXAMPLE_BLOCK.sub("\n", text)
