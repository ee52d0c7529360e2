"""Building the model's context from overlays: the loading logic and the three guarantees.

Pure code: the orchestration reads the inputs through the store (`LoopSource` per loop in
scope, oldest first) and this module turns them into a `BuiltContext`:

1. **Load.** Every turn of a loop is shown exactly once: the turns of the loop's block
   `keep_first` range as raw messages, each section's turns by the section's replacement
   messages, and every turn the block does not cover (turns appended after the block
   was written, or a loop with no block) as raw messages.
2. **Pair.** A tool result must answer a call of the assistant message right before it;
   one that does not (an orphan) is left out and reported. A call with no result (an
   interrupted run) gets a synthetic error result saying so, and is reported.
3. **Fit.** When the context is over the budget, `sessionstore._trim.fit_context` cuts
   in the order that loses least: bulky tool output, older raw turns, summaries
   shortened, the newest raw turns, summaries at their smallest, the session's task,
   the system prompt; the latest user request is always kept, and how many messages
   were left out is said once. If even that cannot fit, `ContextOverflowError` says
   what was needed and what was available.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from sessionstore._framing import settle_roles
from sessionstore._items import (
    BuiltContext,
    ContextItem,
    InterruptedCall,
    LoopSource,
)
from sessionstore._pairing import interrupted_result
from sessionstore._tokens import message_tokens
from sessionstore._trim import fit_context
from sessionstore.config import CompactionScope
from sessionstore.models import (
    AssistantMessage,
    CompactionBlock,
    SessionDigest,
    StoredMessage,
    SystemMessage,
    ToolResultMessage,
    TurnRange,
)
from sessionstore.models._batch import paused_gc

__all__ = ["assemble", "build", "pair_tool_calls", "segments"]


def segments(
    turn_count: int, block: CompactionBlock | None
) -> list[tuple[TurnRange, Literal["raw", "compacted", "recent"]]]:
    """Split a loop's turns into what shows them: raw turns or a block section.

    `keep_first` and the turns no section covers are `raw`. Sections are ordered by
    their start turn. Turns past `turn_count` (none, normally) are not returned.
    """
    if turn_count <= 0:
        return []
    if block is None:
        return [(TurnRange(start_turn=0, end_turn=turn_count - 1), "raw")]
    sections: list[tuple[TurnRange, Literal["raw", "compacted", "recent"]]] = [
        (section.range, kind)  # type: ignore[misc]
        for kind, section in block.sections()
    ]
    sections.sort(key=lambda pair: pair[0].start_turn)
    result: list[tuple[TurnRange, Literal["raw", "compacted", "recent"]]] = []
    next_turn = 0
    for turns, kind in sections:
        if turns.start_turn >= turn_count:
            break
        if turns.start_turn > next_turn:
            result.append((TurnRange(start_turn=next_turn, end_turn=turns.start_turn - 1), "raw"))
        result.append((turns, kind))
        next_turn = max(next_turn, turns.end_turn + 1)
    if next_turn < turn_count:
        result.append((TurnRange(start_turn=next_turn, end_turn=turn_count - 1), "raw"))
    return result


def _raw_item(stored: StoredMessage, *, pinned: bool = False) -> ContextItem:
    return ContextItem(
        message=stored.message,
        tokens=stored.token_count,
        source="raw",
        loop_id=stored.loop_id,
        message_id=stored.id,
        covers=(stored.id,),
        pinned=pinned,
    )


def assemble(
    loops: Sequence[LoopSource], latest_user: StoredMessage | None = None
) -> list[ContextItem]:
    """Return the loaded items of `loops` (oldest first), before pairing and fitting.

    When `latest_user` (the chain's latest raw user message) is not shown raw, it is
    put back: right after the section that replaced it, or first when its loop is out
    of scope.
    """
    items: list[ContextItem] = []
    pinned_placed = latest_user is None
    for source in loops:
        raw_by_turn: dict[int, list[StoredMessage]] = {}
        for stored in source.raw:
            raw_by_turn.setdefault(stored.turn_index, []).append(stored)
        turn_count = max(source.loop.turn_count, max(raw_by_turn, default=-1) + 1)
        block = source.block
        for turns, kind in segments(turn_count, block):
            if kind == "raw":
                for turn in range(turns.start_turn, turns.end_turn + 1):
                    for stored in raw_by_turn.get(turn, ()):
                        pinned = latest_user is not None and stored.id == latest_user.id
                        pinned_placed = pinned_placed or pinned
                        items.append(_raw_item(stored, pinned=pinned))
                continue
            assert block is not None
            section = block.keep_compacted if kind == "compacted" else block.keep_recent
            assert section is not None
            for replacement in section.messages:
                items.append(
                    ContextItem(
                        message=replacement.message,
                        tokens=replacement.token_count or message_tokens(replacement.message),
                        source=kind,
                        loop_id=source.loop.id,
                        replacement_id=replacement.id,
                        covers=tuple(replacement.covers),
                    )
                )
            if (
                not pinned_placed
                and latest_user is not None
                and latest_user.loop_id == source.loop.id
                and latest_user.turn_index in turns
            ):
                shown = [
                    index
                    for index in range(len(items) - len(section.messages), len(items))
                    if latest_user.id in items[index].covers
                    and items[index].message == latest_user.message
                ]
                if shown:
                    items[shown[0]] = replace(items[shown[0]], pinned=True)
                else:
                    items.append(_raw_item(latest_user, pinned=True))
                pinned_placed = True
    if not pinned_placed and latest_user is not None:
        items.insert(0, _raw_item(latest_user, pinned=True))
    return items


def _synthetic_result(call_id: str, tool_name: str) -> ContextItem:
    message = interrupted_result(call_id, tool_name)
    return ContextItem(message=message, tokens=message_tokens(message), source="synthetic")


def pair_tool_calls(
    items: Sequence[ContextItem],
) -> tuple[list[ContextItem], list[InterruptedCall], list[int]]:
    """Make every tool call and result pair up, as provider APIs require.

    A tool result is kept only when it answers a call of the assistant message just
    before it (only tool results in between). A call left without a result gets a
    synthetic error result right after its group. Returns the items, the interrupted
    calls and the raw ids of the orphan results left out.
    """
    result: list[ContextItem] = []
    interrupted: list[InterruptedCall] = []
    orphans: list[int] = []
    open_calls: dict[str, str] = {}
    owner: ContextItem | None = None

    def close_group(next_item: ContextItem | None) -> None:
        if owner is None:
            return
        at_end = next_item is None or next_item.loop_id != owner.loop_id
        for call_id, tool_name in open_calls.items():
            result.append(_synthetic_result(call_id, tool_name))
            interrupted.append(
                InterruptedCall(owner.loop_id, owner.message_id, call_id, tool_name, at_end)
            )
        open_calls.clear()

    for item in items:
        message = item.message
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id in open_calls:
                del open_calls[message.tool_call_id]
                result.append(item)
            else:
                orphans.extend(item.covers)
            continue
        close_group(item)
        owner = None
        result.append(item)
        if isinstance(message, AssistantMessage):
            calls = message.tool_calls
            if calls:
                owner = item
                open_calls.update((call.id, call.name) for call in calls)
    close_group(None)
    return result, interrupted, orphans


def _redacted(item: ContextItem) -> ContextItem:
    """Return the item with secrets redacted from its message (recounted if it changed)."""
    # Imported here: its patterns compile only for a context built with redact_secrets.
    from sessionstore._redact import redact_message

    message = redact_message(item.message)
    if message == item.message:
        return item
    return replace(item, message=message, tokens=message_tokens(message), redacted=True)


# The messages are decoded here (each raw record on first use) and, with the items and
# units made of them, all survive the build: the collector would scan them again and
# again as they pile up (most of a build of thousands of messages; see paused_gc).
@paused_gc()
def build(
    loops: Sequence[LoopSource],
    *,
    budget: int,
    latest_user: StoredMessage | None = None,
    token_scale: float = 1.0,
    overlay: str = "default",
    as_of: object | None = None,
    scope: CompactionScope | None = None,
    digest: SessionDigest | None = None,
    redact_secrets: bool = False,
    own_system_prompt: bool = False,
    system: Sequence[StoredMessage] = (),
) -> BuiltContext:
    """Load, pair and fit: the whole of what the model sees, from `loops` (oldest first).

    A session `digest` comes first; fitting shortens it, and drops it only when not even
    its smallest form fits. With `own_system_prompt` (the caller sends its own system
    prompt, and reserved room for it), the stored system messages are left out; else the
    `system` messages (the system prompt of the chain's first loop, when that loop is
    not among `loops`) come first. With
    `redact_secrets`, credentials are redacted from every message, the protected head
    and tail included, before anything is counted.

    Raises:
        ValueError: `budget` is not positive or `token_scale` is not positive.
        ContextOverflowError: even the latest user request cannot fit.
    """
    if budget <= 0:
        raise ValueError(f"the token budget must be positive, got {budget}")
    if not token_scale > 0:
        raise ValueError(f"token_scale must be positive, got {token_scale}")
    items = assemble(loops, latest_user)
    if system:
        items[:0] = [_raw_item(stored) for stored in system]
    if own_system_prompt:
        items = [i for i in items if i.pinned or not isinstance(i.message, SystemMessage)]
    if redact_secrets:
        items = [_redacted(item) for item in items]
    items, interrupted, orphans = pair_tool_calls(items)
    root = loops[0].loop if loops else None
    fitted = fit_context(
        items,
        budget,
        digest=digest,
        token_scale=token_scale,
        task_loop_id=root.id if root is not None and root.parent_loop_id is None else None,
    )
    loaded = math.ceil(fitted.loaded_tokens * token_scale)
    items, trimmed = settle_roles(fitted.items), fitted.trimmed
    return BuiltContext(
        items=items,
        budget=budget,
        tokens=math.ceil(sum(item.tokens for item in items) * token_scale),
        loop_ids=[source.loop.id for source in loops],
        interrupted_calls=interrupted,
        orphan_results=orphans,
        trimmed_messages=trimmed,
        loaded_tokens=loaded,
        overlay=overlay,
        as_of=as_of,
        scope=scope,
    )
