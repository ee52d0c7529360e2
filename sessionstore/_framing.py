"""How the loader frames what it wrote: summaries, the session digest, trim markers (pure).

A run of one loop's summary messages reaches the model as one message inside a
reference-only framing with an end marker; the session digest is framed the same way;
each such text takes the role that keeps user and assistant turns alternating (Hermes
Agent's rule); and what is counted is the framed text that is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sessionstore._items import ContextItem
from sessionstore._tokens import message_tokens
from sessionstore.models import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Message,
    SessionDigest,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "COMPRESSION_NOTE",
    "COMPRESSION_NOTE_BRIEF",
    "DIGEST_HEADER",
    "RESTORED_FILE_PREFIX",
    "SUMMARY_CLOSE",
    "SUMMARY_MORE",
    "SUMMARY_OPEN",
    "SUMMARY_OPEN_TERSE",
    "TRIM_MARKER",
    "digest_item",
    "digest_tokens",
    "framed",
    "is_restored_file",
    "is_summary_item",
    "role_of",
    "settle_roles",
    "shown_section",
    "summary_body",
    "text_message",
]

TRIM_MARKER = "[Context compacted: {removed} messages removed to fit the token budget]"
"""The text that says how many messages trimming left out (once per context)."""

COMPRESSION_NOTE = (
    "[Note: Some earlier conversation turns have been compacted into a handoff summary to "
    "preserve context space. The current session state may still reflect earlier work, so "
    "build on that summary and state rather than re-doing work.]"
)
"""Seed 001's note, sent after the system prompt when the context holds compacted turns."""

COMPRESSION_NOTE_BRIEF = "[Note: earlier turns were compacted; build on the summary and state.]"
"""The compression note when the budget is tight."""

DIGEST_HEADER = "Digest of the earlier conversation:"
"""The line that opens the session digest inside its framing."""

RESTORED_FILE_PREFIX = "[Restored file after compaction]"
"""The first words of a restored file read (`strategies.rehydrate_recent_reads` writes it)."""

SUMMARY_OPEN = (
    "[CONTEXT SUMMARY — REFERENCE ONLY] Earlier turns, compacted. Background, not "
    "instructions: they were already handled. Respond to the latest user message after it."
)
"""The framing that opens every summary the model is shown."""

SUMMARY_OPEN_TERSE = "[CONTEXT SUMMARY — REFERENCE ONLY: earlier turns, already handled]"
"""The framing that opens the first summary when summaries must shorten to fit: what the
full one says, in a third of its tokens."""

SUMMARY_CLOSE = "[END OF CONTEXT SUMMARY]"
"""The marker that closes it."""

SUMMARY_MORE = "[CONTEXT SUMMARY, CONTINUED — REFERENCE ONLY]"
"""The shorter framing that opens each further summary of a context (the first says it all)."""


def is_summary_item(item: ContextItem) -> bool:
    """Return True for a summary message of a block's compacted section."""
    return item.source == "compacted" and isinstance(
        item.message, CompactionSummaryMessage | BranchSummaryMessage
    )


def framed(text: str, note: str | None = None, *, more: bool = False, terse: bool = False) -> str:
    """Return `text` inside the reference-only framing (with `note` after its first line).

    With `more`, the shorter framing of a summary that follows another (`SUMMARY_MORE`);
    with `terse`, the shorter one of a first summary (`SUMMARY_OPEN_TERSE`).
    """
    opening = SUMMARY_MORE if more else SUMMARY_OPEN_TERSE if terse else SUMMARY_OPEN
    if note is not None:
        opening = f"{opening}\n{note}"
    return f"{opening}\n\n{text}\n\n{SUMMARY_CLOSE}"


def summary_body(texts: Sequence[str], restored: Sequence[str] = ()) -> str:
    """Return what a framed summary holds: its summaries, then the restored file reads."""
    return "\n\n".join(part for part in ("\n".join(texts), *restored) if part)


def is_restored_file(message: Message) -> bool:
    """Return True for a restored file read (a user message that opens with the prefix)."""
    if not isinstance(message, UserMessage) or not message.content:
        return False
    first = message.content[0]
    return isinstance(first, TextContent) and first.text.startswith(RESTORED_FILE_PREFIX)


def text_message(text: str) -> UserMessage:
    """Return a user message of one text block, built without re-validating our own text."""
    return UserMessage.model_construct(content=[TextContent.model_construct(text=text)])


def shown_section(messages: Sequence[Message]) -> tuple[int, int]:
    """Return how many messages a section's replacements are shown as, and their tokens.

    The loader shows each run of summary messages, with the restored file reads right
    after it, as one framed message; the other messages are shown, and cost, one by one.
    """
    count = total = 0
    texts: list[str] = []
    restored: list[str] = []

    def flush() -> None:
        nonlocal count, total
        if texts:
            count += 1
            total += message_tokens(text_message(framed(summary_body(texts, restored))))
            texts.clear()
            restored.clear()

    for message in messages:
        if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
            if restored:
                flush()
            texts.append(message.summary)
            continue
        if texts and is_restored_file(message):
            assert isinstance(message, UserMessage)
            restored.append(message.text)
            continue
        flush()
        count += 1
        total += message_tokens(message)
    flush()
    return count, total


def role_of(message: Message) -> str:
    """Return the provider role a message is sent with (`user` for the kinds with none)."""
    if isinstance(message, AssistantMessage):
        return "assistant"
    if isinstance(message, ToolResultMessage):
        return "tool"
    if isinstance(message, SystemMessage):
        return "system"
    return "user"  # the kinds providers have no role for are shown as user text


def settle_roles(items: Sequence[ContextItem]) -> list[ContextItem]:
    """Give each loader-written text the role that keeps turns alternating.

    As Hermes Agent does, a text after an assistant message or a tool result is a user
    message, otherwise an assistant message, and the choice flips when it would repeat
    the role of the message after it and flipping does not repeat the one before. The
    first message of a context (system messages aside) is a user message unless a user
    message follows it.
    Adjacent loader texts (a trim marker, summaries of consecutive loops) so alternate.
    """
    merged = list(items)
    result: list[ContextItem] = []
    for index, item in enumerate(merged):
        if not item.flexible:
            result.append(item)
            continue
        shown = [x for x in result if not isinstance(x.message, SystemMessage)]
        before = role_of(shown[-1].message) if shown else None
        following = merged[index + 1] if index + 1 < len(merged) else None
        after = None if following is None or following.flexible else role_of(following.message)
        if before is None:
            role = "assistant" if after == "user" else "user"
        else:
            role = "user" if before in ("assistant", "tool") else "assistant"
            flipped = "assistant" if role == "user" else "user"
            if role == after and flipped != before:
                role = flipped
        if role == "assistant" and isinstance(item.message, UserMessage):
            message: Message = AssistantMessage(content=[TextContent(text=item.message.text)])
            item = replace(item, message=message, tokens=message_tokens(message))
        result.append(item)
    return result


def digest_tokens(digest: SessionDigest) -> int:
    """Return what the session digest costs in the context, framing included."""
    return digest_item(digest).tokens


def digest_item(digest: SessionDigest) -> ContextItem:
    """Return the session digest as the framed item that leads a context."""
    text = framed(f"{DIGEST_HEADER}\n{digest.message.summary}")
    message = text_message(text)
    return ContextItem(
        message=message, tokens=message_tokens(message), source="digest", flexible=True
    )
