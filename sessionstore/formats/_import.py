"""Import a conversation file into a store: one session per line, stopping at a bad line.

Each line is parsed by `parse_conversation_line` and written with
`SessionStore.import_session`, one transaction per line. A line whose session already
exists is skipped, so importing a file again is safe; a line that cannot be imported
stops the import with its number, and the sessions of the lines before it stay.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import ValidationError

from sessionstore.errors import (
    ImportLineError,
    SessionExistsError,
    SessionStoreError,
    describe_validation_error,
)
from sessionstore.formats._jsonl import parse_conversation_line

if TYPE_CHECKING:
    from sessionstore.store import SessionStore, TenantStore

__all__ = ["ImportReport", "import_jsonl"]


@dataclass(slots=True)
class ImportReport:
    """The sessions an import created and the ones it found already there, in line order."""

    imported: list[str] = field(default_factory=list)
    """The ids of the sessions created."""
    skipped: list[str] = field(default_factory=list)
    """The ids of the lines' sessions that already existed; they were left as they were."""


async def import_jsonl(
    store: SessionStore | TenantStore,
    lines: Iterable[str | bytes],
    *,
    app_name: str | None = None,
    user_id: str | None = None,
) -> ImportReport:
    """Import conversations, one per line, each as a session of its own.

    Blank lines are passed over. A conversation's session id, title and metadata come
    from its line (see `parse_conversation_line`); every user message starts a loop.

    Args:
        store: The store to write to; its schema must be at the head.
        lines: The lines of a JSONL file, such as the file object itself (text or binary).
        app_name: The application that owns the sessions; the store's default if None.
        user_id: The user that owns the sessions; the store's default if None.

    Returns:
        The sessions created and the ones skipped because they already existed.

    Raises:
        ImportLineError: a line is not a conversation, holds a malformed message, or
            could not be written; the lines before it stay imported.

    Example:
        >>> async def load(store):
        ...     lines = Path("conversations.jsonl").read_bytes().splitlines()
        ...     return await import_jsonl(store, lines, app_name="bench")
    """
    report = ImportReport()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            conversation = parse_conversation_line(line)
            await store.import_session(
                conversation.loops,
                session_id=conversation.session_id,
                app_name=app_name,
                user_id=user_id,
                title=conversation.title,
                metadata=conversation.metadata,
            )
            is_new = True
        except SessionExistsError:
            is_new = False
        except ValidationError as exc:
            raise ImportLineError(number, describe_validation_error(exc), report) from exc
        except (SessionStoreError, ValueError) as exc:
            raise ImportLineError(number, str(exc), report) from exc
        target = report.imported if is_new else report.skipped
        target.append(conversation.session_id)
    return report
