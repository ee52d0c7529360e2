"""Export a session from a store as one conversation, the shape `import_jsonl` reads back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from sessionstore._redact import redact, redact_message
from sessionstore.formats._openai import openai_items

if TYPE_CHECKING:
    from sessionstore.models import Message, Session, StoredMessage

__all__ = ["HistoryReader", "export_conversation", "stream_conversation"]


class HistoryReader(Protocol):
    """What an export reads: a `SessionStore` or `TenantStore` (or the CLI's file reader)."""

    async def get_session(self, session_id: str) -> Session:
        """The session."""
        ...

    def iter_history(
        self, session_id: str, *, loop_id: int | None = None, chunk_size: int = 1000
    ) -> AsyncIterator[list[StoredMessage]]:
        """The raw messages of the chain ending at `loop_id`, in chunks."""
        ...


_MESSAGES = "@@sessionstore-messages@@"
"""Stands for the messages list while the rest of the conversation object is dumped (the
list is the object's last value, so the placeholder's last occurrence is the one)."""


def _redacted_json(value: Any) -> Any:
    """Return a JSON value with every string in it redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted_json(item) for item in value]
    return value


def _messages(chunk: list[StoredMessage], *, redact_secrets: bool) -> list[Message]:
    messages = [stored.message for stored in chunk]
    return [redact_message(m) for m in messages] if redact_secrets else messages


def _shell(session: Session, *, redact_secrets: bool) -> dict[str, Any]:
    shell = {"id": session.id, "title": session.title, "metadata": session.metadata}
    if redact_secrets:
        shell["title"] = None if session.title is None else redact(session.title)
        shell["metadata"] = _redacted_json(session.metadata)
    return shell


async def export_conversation(
    store: HistoryReader,
    session_id: str,
    *,
    loop_id: int | None = None,
    redact_secrets: bool = False,
) -> dict[str, Any]:
    """Return a session's raw history as `{"id", "title", "metadata", "messages": [...]}`.

    The messages are those of the active chain of loops (or of the chain ending at
    `loop_id`) in the OpenAI chat-completions format; compaction never changes them.
    Written as one line of a JSONL file, the result imports back with `import_jsonl`,
    and importing a conversation then exporting it gives back the same messages.
    The result holds every message: for a long history, `stream_conversation` writes
    the same JSON text a chunk at a time. With `redact_secrets`, credentials are redacted
    from the messages, the title and every string of the metadata (`redact`): safe to
    share, but no longer the stored history.

    Raises:
        SessionNotFoundError: there is no such session.
        LoopNotFoundError: `loop_id` is not a loop of the session.
    """
    session = await store.get_session(session_id)
    messages: list[dict[str, Any]] = []
    async for chunk in store.iter_history(session_id, loop_id=loop_id):
        messages += openai_items(_messages(chunk, redact_secrets=redact_secrets), len(messages))
    return {**_shell(session, redact_secrets=redact_secrets), "messages": messages}


async def stream_conversation(
    store: HistoryReader,
    session_id: str,
    *,
    loop_id: int | None = None,
    indent: int | None = None,
    chunk_size: int = 1000,
    redact_secrets: bool = False,
) -> AsyncIterator[str]:
    """Yield `export_conversation`'s result as JSON text, a chunk of messages at a time.

    The pieces joined are `json.dumps(await export_conversation(...), indent=indent,
    ensure_ascii=False)`, but memory holds one chunk of `chunk_size` messages at a time
    (read with `SessionStore.iter_history`), however long the history. `redact_secrets`
    is `export_conversation`'s.

    >>> async def save(store, session_id, path):
    ...     with open(path, "w", encoding="utf-8") as out:
    ...         async for text in stream_conversation(store, session_id):
    ...             out.write(text)

    Raises:
        SessionNotFoundError: there is no such session.
        LoopNotFoundError: `loop_id` is not a loop of the session.
        FormatError: a message cannot be expressed in the OpenAI format.
    """
    session = await store.get_session(session_id)
    shell = {**_shell(session, redact_secrets=redact_secrets), "messages": _MESSAGES}
    head, _, tail = json.dumps(shell, indent=indent, ensure_ascii=False).rpartition(
        f'"{_MESSAGES}"'
    )
    # Inside the object, the list is one level deep and its items two.
    pad = "" if indent is None else "\n" + " " * (2 * indent)
    separator = ", " if indent is None else ","
    chunks = store.iter_history(session_id, loop_id=loop_id, chunk_size=chunk_size)
    # The first chunk is read before anything is yielded: a bad `loop_id` writes nothing.
    first = await anext(chunks, None)
    yield head + "["
    count = 0
    async for chunk in _prepend(first, chunks):
        pieces = []
        for item in openai_items(_messages(chunk, redact_secrets=redact_secrets), count):
            text = json.dumps(item, indent=indent, ensure_ascii=False)
            if indent is not None:
                text = text.replace("\n", pad)
            pieces.append((separator if count else "") + pad + text)
            count += 1
        yield "".join(pieces)
    if count and indent is not None:
        yield "\n" + " " * indent
    yield "]" + tail


async def _prepend(
    first: list[StoredMessage] | None, rest: AsyncIterator[list[StoredMessage]]
) -> AsyncIterator[list[StoredMessage]]:
    if first is not None:
        yield first
    async for chunk in rest:
        yield chunk
