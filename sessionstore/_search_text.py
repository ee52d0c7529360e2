"""Search text: what of a message is indexed, how a query is read, and how a snippet is cut.

PostgreSQL indexes the words of each message (`indexed_text`: the message's
`searchable_text` reduced to words, letters and digits, separated by single spaces), so
its parser sees the words FTS5's tokenizer sees, and the database does no character work
of its own (a `translate()` in PostgreSQL's index expression cost more than the indexing
itself); the append writes their vector (`store/_search_vector.py`, migration 0012).
SQLite stores no search text: its index reads the same fields from each payload with the
database's JSON functions (migration 0010), and FTS5's tokenizer splits them.
A query is read the same way: every word must appear (`query_terms`). A user's query is
never passed to a full-text syntax, so no input is a syntax error. Snippets are cut here
from `searchable_text`, not by the databases, so both backends show the same one.
"""

from __future__ import annotations

import json
import re

from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "MAX_SEARCH_TEXT",
    "MAX_TERMS",
    "SEPARATORS",
    "index_words",
    "indexed_text",
    "query_terms",
    "searchable_text",
    "snippet",
]

MAX_SEARCH_TEXT = 100_000
"""The characters of a message that are indexed (its beginning).

PostgreSQL refuses a `tsvector` over 1 MB; 100,000 characters stay well under it
whatever the script, and cover all but the largest tool outputs.
"""

MAX_TERMS = 32
"""The words of a query that are used; the rest are ignored."""

SEPARATORS = re.compile(r"[\W_]+")
"""Everything but letters and digits separates words (underscores too, as in FTS5)."""


def searchable_text(message: Message) -> str:
    """Return the text of a message that search indexes.

    Text blocks, tool calls (name and arguments), tool outputs (tool name and text), shell
    commands and their output, summaries and custom messages' data. Thinking and images
    are not indexed. The result is cut at `MAX_SEARCH_TEXT` characters.
    """
    parts: list[str]
    match message:
        case UserMessage() | SystemMessage():
            parts = [message.text]
        case AssistantMessage():
            parts = [
                f"{block.name} {block.arguments}" if isinstance(block, ToolCall) else block.text
                for block in message.content
                if isinstance(block, ToolCall | TextContent)
            ]
        case ToolResultMessage():
            parts = [message.tool_name, message.text]
        case BashExecutionMessage():
            parts = [message.command, message.output]
        case BranchSummaryMessage() | CompactionSummaryMessage():
            parts = [message.summary]
        case CustomMessage():
            data = message.data
            shown = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
            parts = [message.custom_type, "" if data is None else shown]
    # PostgreSQL text cannot hold NUL.
    text = "\n".join(part for part in parts if part).replace("\x00", " ")
    return text[:MAX_SEARCH_TEXT]


_ASCII_WORDS = bytes(c if chr(c).isalnum() else 0x20 for c in range(256))
"""A byte translation that keeps ASCII letters and digits and makes every other byte a space."""


def indexed_text(message: Message) -> str:
    """Return what the databases index for a message: its searchable text's words, spaced."""
    return index_words(searchable_text(message))


def index_words(text: str) -> str:
    """Return a searchable text's words, spaced (see `indexed_text`).

    The words `SEPARATORS` splits out, joined by single spaces. An ASCII text (the usual
    case) is split with a byte translation, several times faster than the pattern on a
    long text (the largest cost of PostgreSQL's append in Python), to the same result.
    """
    if text.isascii():
        return b" ".join(text.encode("ascii").translate(_ASCII_WORDS).split()).decode("ascii")
    return SEPARATORS.sub(" ", text).strip()


def query_terms(query: str) -> list[str]:
    """Return the distinct words of a query (letters and digits), at most `MAX_TERMS`.

    Case is left to the databases, which fold it the same way in documents and queries.

    Raises:
        ValueError: the query is blank.
    """
    if not query.strip():
        raise ValueError("the search query is empty")
    terms: dict[str, str] = {}
    for word in SEPARATORS.sub(" ", query).split():
        terms.setdefault(word.casefold(), word)
    return list(terms.values())[:MAX_TERMS]


def snippet(text: str, terms: list[str], *, width: int = 160) -> str:
    """Return about `width` characters of `text` around the first term found, terms in `**`.

    Terms match whole words, case-insensitively; without one, the snippet is the start.
    """
    flat = " ".join(text.split())
    pattern = _pattern(terms)
    found = _densest(pattern, flat, width) if pattern is not None else None
    start = 0
    if found is not None:
        start = max(0, found.start() - width // 3)
        # Start at a word boundary, not inside a word.
        if start > 0:
            space = flat.find(" ", start)
            start = space + 1 if 0 <= space < found.start() else start
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > (found.end() if found is not None else start) else end
    cut = flat[start:end]
    if pattern is not None:
        cut = pattern.sub(lambda m: f"**{m.group(0)}**", cut)
    return ("…" if start > 0 else "") + cut + ("…" if end < len(flat) else "")


def _densest(pattern: re.Pattern[str], text: str, width: int) -> re.Match[str] | None:
    """Return the match that starts the window holding the most distinct terms."""
    best: re.Match[str] | None = None
    best_count = 0
    matches = list(pattern.finditer(text, 0, len(text)))[:200]
    for i, match in enumerate(matches):
        window = {m.group(0).lower() for m in matches[i:] if m.end() <= match.start() + width}
        if len(window) > best_count:
            best, best_count = match, len(window)
    return best


def _pattern(terms: list[str]) -> re.Pattern[str] | None:
    if not terms:
        return None
    # A term is a whole word: no letter or digit on either side.
    alternatives = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
    return re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])", re.IGNORECASE)
