"""The context the model sees: as readable text, an OpenAI message list or JSON, and its summary.

The summary (tokens against the budget, sources, loops in scope, trimmed messages,
interrupted calls) ends the text; with the other formats it goes to stderr, so stdout
can be piped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from sessionstore import (
    AssistantMessage,
    BuiltContext,
    ContextItem,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore._items import Source
from sessionstore.cli._render._loops import LoopNumbers
from sessionstore.cli._render._output import ids, print_json, share
from sessionstore.cli._render._printable import echo
from sessionstore.formats._text import render_as_text
from sessionstore.models import message_payload

__all__ = [
    "ContextFormat",
    "context_footer",
    "context_summary_json",
    "message_text",
    "print_context",
]

ContextFormat = Literal["text", "openai", "json"]


def _as_of_json(as_of: object) -> object:
    return as_of.isoformat() if isinstance(as_of, datetime) else as_of


def context_summary_json(
    context: BuiltContext, max_context_tokens: int, numbers: LoopNumbers
) -> dict[str, Any]:
    """Return the summary of a built context, without its messages, as JSON data.

    Loops are named by id and by number in the session (`loop_numbers`, `loop_number`).
    """
    return {
        "max_context_tokens": max_context_tokens,
        "budget": context.budget,
        "tokens": context.tokens,
        "loaded_tokens": context.loaded_tokens,
        "messages": len(context.items),
        "sources": dict(Counter(item.source for item in context.items)),
        "loop_ids": context.loop_ids,
        "loop_numbers": numbers.all(context.loop_ids),
        "trimmed_messages": context.trimmed_messages,
        "interrupted_calls": [
            {
                "loop_id": call.loop_id,
                "loop_number": numbers.optional(call.loop_id),
                "message_id": call.message_id,
                "call_id": call.call_id,
                "tool_name": call.tool_name,
                "at_end": call.at_end,
            }
            for call in context.interrupted_calls
        ],
        "orphan_results": context.orphan_results,
        "overlay": context.overlay,
        "as_of": _as_of_json(context.as_of),
    }


def _item_json(item: ContextItem, numbers: LoopNumbers) -> dict[str, Any]:
    return {
        "source": item.source,
        "loop_id": item.loop_id,
        "loop_number": numbers.optional(item.loop_id),
        "message_id": item.message_id,
        "replacement_id": item.replacement_id,
        "covers": list(item.covers),
        "tokens": item.tokens,
        "pinned": item.pinned,
        "message": message_payload(item.message),
    }


def context_footer(
    context: BuiltContext, max_context_tokens: int, numbers: LoopNumbers
) -> list[str]:
    """Return the summary of a built context as lines of text, loops named by number."""
    room = f"{context.budget:,}"
    if context.budget != max_context_tokens:
        room += (
            f" ({max_context_tokens:,} minus {max_context_tokens - context.budget:,} "
            "for the system prompt)"
        )
    counts = Counter(item.source for item in context.items)
    kinds: tuple[Source, ...] = (
        "digest",
        "built",
        "raw",
        "compacted",
        "recent",
        "shortened",
        "synthetic",
        "marker",
    )
    sources = [(s, counts[s]) for s in kinds]
    lines = [
        f"tokens: {context.tokens:,} of {room} ({share(context.tokens, context.budget)}), "
        f"{len(context.items)} messages",
        "sources: "
        + (", ".join(f"{source} {count}" for source, count in sources if count) or "none"),
        f"loops in scope: {ids(numbers.all(context.loop_ids))}",
        f"trimmed to fit the budget: {context.trimmed_messages} message(s)",
    ]
    calls = context.interrupted_calls
    described = "; ".join(
        f"{call.tool_name} {call.call_id} in loop {numbers.optional(call.loop_id)}"
        for call in calls
    )
    lines.append(
        f"interrupted calls: {len(calls)}"
        + (f" ({described}; each answered with a synthetic error result)" if calls else "")
    )
    if context.orphan_results:
        lines.append(
            f"tool results left out (no call in the context): {ids(context.orphan_results)}"
        )
    if context.as_of is not None:
        lines.append(f"as of: {_as_of_json(context.as_of)}")
    return lines


def _blocks_text(blocks: Sequence[object]) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ThinkingContent):
            parts.append(
                "(thinking, redacted)" if block.redacted else f"(thinking) {block.thinking}"
            )
        elif isinstance(block, ToolCall):
            parts.append(f"→ {block.name}({block.arguments})")
        elif isinstance(block, ImageContent):
            parts.append("[image]")
    return "\n".join(parts)


def message_text(message: Message) -> str:
    """Render any message as readable text."""
    if isinstance(message, ToolResultMessage):
        status = "error" if message.is_error else "result"
        head = f"[{message.tool_name or 'tool'} {status} for {message.tool_call_id}]"
        return f"{head}\n{_blocks_text(message.content)}"
    if isinstance(message, SystemMessage | UserMessage | AssistantMessage):
        return _blocks_text(message.content)
    rendered = render_as_text(message)
    return "(a custom message that is not shown to the model)" if rendered is None else rendered


def _origin(item: ContextItem, numbers: LoopNumbers) -> str:
    if item.source == "raw":
        where = f"raw · loop {numbers.optional(item.loop_id)} · message {item.message_id}"
    elif item.source in ("compacted", "recent"):
        where = (
            f"{item.source} · loop {numbers.optional(item.loop_id)} "
            f"· replacement {item.replacement_id} · covers {len(item.covers)} message(s)"
        )
    elif item.source == "synthetic":
        where = "synthetic (added by the loader)"
    elif item.source == "digest":
        where = "session digest (the loops before the scope)"
    elif item.source == "built":
        where = (
            # Merged summaries, and raw turns the budget dropped folded into one: its
            # messages were compacted before, or left out to fit now.
            f"digest built for this context (not stored) · covers {len(item.covers)} "
            "message(s), compacted or left out to fit"
        )
    elif item.source == "shortened":
        where = f"shortened to fit · loop {item.loop_id} · message {item.message_id}"
    else:
        where = "marker (messages trimmed to fit)"
    return where + (" · latest user request" if item.pinned else "")


def print_context(
    session_id: str,
    built: BuiltContext,
    max_context_tokens: int,
    output_format: ContextFormat,
    numbers: LoopNumbers,
) -> None:
    """Print a built context in `output_format`, then its summary (on stderr unless text).

    Stored text is printed as printable text (`printable`): escape sequences are shown.
    """
    footer = context_footer(built, max_context_tokens, numbers)
    if output_format == "text":
        for number, item in enumerate(built.items, start=1):
            origin = _origin(item, numbers)
            echo(f"── {number}. {item.message.kind} · {origin} · {item.tokens:,} tokens")
            echo(message_text(item.message))
            echo()
        if not built.items:
            echo("(the context is empty: the session has no messages)\n")
        echo("── context of session " + repr(session_id))
        for line in footer:
            echo(line)
        return
    if output_format == "openai":
        from sessionstore import to_openai  # the converter loads only for this format

        print_json(to_openai(built.messages))
    else:
        print_json(
            {
                "session_id": session_id,
                **context_summary_json(built, max_context_tokens, numbers),
                "items": [_item_json(item, numbers) for item in built.items],
            }
        )
    for line in footer:
        echo(line, err=True)
