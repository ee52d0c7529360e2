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
    "SUMMARY_CLOSE",
    "SUMMARY_OPEN",
    "TRIM_MARKER",
    "digest_item",
    "digest_tokens",
    "merge_summaries",
    "settle_roles",
    "shown_section",
]

TRIM_MARKER = "[Context compacted: {removed} messages removed to fit the token budget]"
"""The text that stands where trimming left messages out."""

SUMMARY_OPEN = (
    "[CONTEXT SUMMARY — REFERENCE ONLY] Earlier turns, compacted. Background, not "
    "instructions: they were already handled. Respond to the latest user message after it."
)
"""The framing that opens every summary the model is shown."""

SUMMARY_CLOSE = "[END OF CONTEXT SUMMARY]"
"""The marker that closes it."""


def _is_summary(item: ContextItem) -> bool:
    return item.source == "compacted" and isinstance(
        item.message, CompactionSummaryMessage | BranchSummaryMessage
    )


def _framed(text: str) -> str:
    return f"{SUMMARY_OPEN}\n\n{text}\n\n{SUMMARY_CLOSE}"


def text_message(text: str) -> UserMessage:
    """Return a user message of one text block, built without re-validating our own text."""
    return UserMessage.model_construct(content=[TextContent.model_construct(text=text)])


def _summary_item(run: Sequence[ContextItem]) -> ContextItem:
    """Return the one framed message that shows a loop's run of summary items."""
    lines = [
        item.message.summary
        for item in run
        if isinstance(item.message, CompactionSummaryMessage | BranchSummaryMessage)
    ]
    message = text_message(_framed("\n".join(lines)))
    covers: tuple[int, ...] = ()
    for item in run:
        covers += item.covers
    return ContextItem(
        message=message,
        tokens=message_tokens(message),
        source="compacted",
        loop_id=run[0].loop_id,
        replacement_id=run[0].replacement_id,
        covers=covers,
        pinned=any(item.pinned for item in run),
        flexible=True,
    )


def shown_section(messages: Sequence[Message]) -> tuple[int, int]:
    """Return how many messages a section's replacements are shown as, and their tokens.

    The loader shows each run of summary messages as one framed message
    (`merge_summaries`); the other messages are shown, and cost, one by one.
    """
    count = total = 0
    run: list[str] = []

    def flush() -> None:
        nonlocal count, total
        if run:
            count += 1
            total += message_tokens(text_message(_framed("\n".join(run))))
            run.clear()

    for message in messages:
        if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
            run.append(message.summary)
            continue
        flush()
        count += 1
        total += message_tokens(message)
    flush()
    return count, total


def merge_summaries(items: Sequence[ContextItem]) -> list[ContextItem]:
    """Show each loop's run of summary messages as one framed summary message.

    A compacted section reaches the model as one message per loop, whatever number of
    replacement messages its block holds: the summaries are joined inside a
    reference-only framing that ends with a marker. Its role is chosen later, by
    `settle_roles`.
    """
    result: list[ContextItem] = []
    run: list[ContextItem] = []

    def flush() -> None:
        if run:
            result.append(_summary_item(run))
            run.clear()

    for item in items:
        if not _is_summary(item):
            if run:
                flush()
            result.append(item)
            continue
        if run and run[-1].loop_id != item.loop_id:
            flush()
        run.append(item)
    flush()
    return result


def _role(message: Message) -> str:
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
    first message of a context is a user message unless a user message follows it.
    Adjacent loader texts (a trim marker, summaries of consecutive loops) so alternate.
    """
    merged = list(items)
    result: list[ContextItem] = []
    for index, item in enumerate(merged):
        if not item.flexible:
            result.append(item)
            continue
        before = _role(result[-1].message) if result else None
        following = merged[index + 1] if index + 1 < len(merged) else None
        after = None if following is None or following.flexible else _role(following.message)
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
    text = _framed(f"Digest of the earlier conversation:\n{digest.message.summary}")
    message = text_message(text)
    return ContextItem(
        message=message, tokens=message_tokens(message), source="digest", flexible=True
    )
