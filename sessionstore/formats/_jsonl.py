"""Conversation files: one OpenAI-format conversation a line, as in the shared datasets.

A line is `{"id", "source", "license", "meta", "messages": [...]}`; the `title` and
`metadata` keys that `sessionstore export` writes are read too, so an export imports back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sessionstore.errors import FormatError
from sessionstore.formats._openai import from_openai
from sessionstore.models import (
    MAX_JSON_DEPTH,
    SESSION_ID_MAX_LENGTH,
    Message,
    SystemMessage,
    UserMessage,
)

__all__ = ["METADATA_KEYS", "Conversation", "parse_conversation_line", "split_into_loops"]

METADATA_KEYS = ("source", "license", "meta")
"""Top-level keys of a line that are kept in the session's metadata."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation of a JSONL file, split into loops."""

    session_id: str
    """The line's `id`, or (when it has none or it is too long) one derived from the line."""
    title: str | None
    metadata: dict[str, Any]
    loops: list[list[Message]]


def split_into_loops(messages: Sequence[Message]) -> list[list[Message]]:
    """Split a conversation into loops, one per user request.

    Every user message starts a loop; what comes before the first one (typically the
    system prompt) belongs to the first loop.
    """
    loops: list[list[Message]] = []
    for message in messages:
        if not loops or (
            isinstance(message, UserMessage)
            and not all(isinstance(earlier, SystemMessage) for earlier in loops[-1])
        ):
            loops.append([])
        loops[-1].append(message)
    return loops


def parse_conversation_line(line: str | bytes) -> Conversation:
    """Parse one line into a `Conversation`.

    Raises:
        FormatError: the line is not valid JSON, not a conversation object, or holds a
            malformed message.
    """
    try:
        data = json.loads(line)
    except ValueError as exc:  # JSONDecodeError, or UnicodeDecodeError for bad UTF-8
        raise FormatError(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise FormatError(
            f"invalid JSON: nested too deeply to read (values may nest {MAX_JSON_DEPTH} levels)"
        ) from None
    if not isinstance(data, dict):
        raise FormatError(f"expected a JSON object, got {type(data).__name__}")
    if "messages" not in data:
        raise FormatError("the object has no 'messages' list")
    line_id = data.get("id")
    if line_id is not None and not isinstance(line_id, str):
        raise FormatError(f"'id' must be a string, not {type(line_id).__name__}")
    title = data.get("title", line_id)
    if title is not None and not isinstance(title, str):
        raise FormatError(f"'title' must be a string, not {type(title).__name__}")
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise FormatError(f"'metadata' must be an object, not {type(metadata).__name__}")
    metadata = {**metadata, **{key: data[key] for key in METADATA_KEYS if key in data}}
    if line_id and len(line_id) <= SESSION_ID_MAX_LENGTH:
        session_id = line_id
    else:
        # Derived from the content, not random, so that importing the line again skips it.
        raw = line.encode() if isinstance(line, str) else line
        session_id = hashlib.sha256(raw.strip()).hexdigest()[:32]
    loops = split_into_loops(from_openai(data["messages"]))
    return Conversation(session_id, title, metadata, loops)
