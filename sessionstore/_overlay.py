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
3. **Fit.** When the context is over the budget, whole units (a message, or an assistant
   message with its tool results) are dropped oldest first, a marker says how many
   messages were left out, and the latest user request is always kept. If even that
   cannot fit, `ContextOverflowError` says what was needed and what was available.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

from sessionstore._framing import (
    TRIM_MARKER,
    digest_item,
    merge_summaries,
    settle_roles,
)
from sessionstore._items import (
    BuiltContext,
    ContextItem,
    InterruptedCall,
    LoopSource,
)
from sessionstore._pairing import interrupted_result
from sessionstore._redact import redact_message
from sessionstore._tokens import message_tokens
from sessionstore.config import CompactionScope
from sessionstore.errors import ContextOverflowError
from sessionstore.models import (
    AssistantMessage,
    CompactionBlock,
    SessionDigest,
    StoredMessage,
    TextContent,
    ToolResultMessage,
    TurnRange,
    UserMessage,
)

__all__ = ["assemble", "build", "fit_to_budget", "pair_tool_calls", "segments"]


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


def _units(items: Sequence[ContextItem]) -> list[list[ContextItem]]:
    """Group items into units that must stay together: an assistant with its results."""
    units: list[list[ContextItem]] = []
    for item in items:
        if isinstance(item.message, ToolResultMessage) and units:
            units[-1].append(item)
        else:
            units.append([item])
    return units


def _marker(removed: int) -> ContextItem:
    message = UserMessage(content=[TextContent(text=TRIM_MARKER.format(removed=removed))])
    return ContextItem(
        message=message, tokens=message_tokens(message), source="marker", flexible=True
    )


def _fit_with_lead(
    lead: list[ContextItem], items: Sequence[ContextItem], budget: int, token_scale: float
) -> tuple[list[ContextItem], int]:
    """Fit `items` beside the `lead` items (the digest); drop the lead only if they cannot."""
    reserved = math.ceil(sum(item.tokens for item in lead) * token_scale)
    if lead and reserved < budget:
        try:
            fitted, trimmed = fit_to_budget(items, budget - reserved, token_scale=token_scale)
        except ContextOverflowError:
            pass
        else:
            return [*lead, *fitted], trimmed
    fitted, trimmed = fit_to_budget(items, budget, token_scale=token_scale)
    return fitted, trimmed + len(lead)


def fit_to_budget(
    items: Sequence[ContextItem], budget: int, *, token_scale: float = 1.0
) -> tuple[list[ContextItem], int]:
    """Drop whole units, oldest first, until the items fit `budget`; keep the pinned one.

    Like the seed's `keep_within_budget`: keep the newest units that fit, stop at the
    first that does not, and say how many messages were left out with a marker (one
    per gap). The unit holding the pinned item (the latest user request) is always
    kept. Summaries are dense: older raw units go before them, so the summaries of
    earlier loops are kept, the newest first, as long as they fit beside the pinned
    request. Returns the items and the number of messages
    left out.

    Raises:
        ContextOverflowError: the pinned unit and its markers alone exceed the budget.
    """

    def cost(tokens: int) -> int:
        return math.ceil(tokens * token_scale)

    total = sum(item.tokens for item in items)
    if cost(total) <= budget:
        return list(items), 0
    units = _units(items)
    sizes = [sum(item.tokens for item in unit) for unit in units]
    marker_size = _marker(sum(len(unit) for unit in units)).tokens
    pinned = {i for i, unit in enumerate(units) if any(x.pinned for x in unit)}
    summaries = {
        i
        for i, unit in enumerate(units)
        if all(x.flexible and x.source == "compacted" for x in unit)
    }
    # Keep as many summaries as fit beside the pinned request, the newest first.
    newest_first = sorted(summaries, reverse=True)
    for kept in range(len(newest_first), -1, -1):
        must = pinned | set(newest_first[:kept])
        start = _longest_tail(sizes, must, marker_size, budget, cost)
        if start is not None:
            return _keep(units, must | set(range(start, len(units))))
    needed = cost(sum(sizes[i] for i in pinned) + marker_size * (1 + len(pinned)))
    what = "the latest user request" if pinned else "a trim marker"
    raise ContextOverflowError(
        f"the smallest valid context ({what} and the trim markers) needs {needed} "
        f"tokens, but the budget leaves {budget}",
        needed=needed,
        available=budget,
    )


def _longest_tail(
    sizes: Sequence[int],
    must: set[int],
    marker_size: int,
    budget: int,
    cost: Callable[[int], int],
) -> int | None:
    """Return where the kept tail starts: the units from there on, plus `must`, fit.

    Scans from the newest unit back and stops at the first that does not fit, as the
    seed does; None when `must` and its markers alone do not fit. Linear: the kept
    `must` units before the tail, and the gaps between them, are running sums.
    """
    count = len(sizes)
    must_before = [0] * (count + 1)
    gaps_before = [0] * (count + 1)
    for index in range(count):
        inside = index in must
        must_before[index + 1] = must_before[index] + (sizes[index] if inside else 0)
        opens_gap = not inside and (index == 0 or index - 1 in must)
        gaps_before[index + 1] = gaps_before[index] + opens_gap

    def needed(start: int, tail: int) -> int:
        return cost(tail + must_before[start] + marker_size * gaps_before[start])

    if needed(count, 0) > budget:
        return None
    start, tail = count, 0
    for index in range(count - 1, -1, -1):
        grown = tail + sizes[index]
        if needed(index, grown) > budget:
            break
        start, tail = index, grown
    return start


def _keep(units: Sequence[list[ContextItem]], keep: set[int]) -> tuple[list[ContextItem], int]:
    """Return the kept units in order, a marker in each gap, and how many messages went."""
    result: list[ContextItem] = []
    removed_total = 0
    gap = 0
    for index, unit in enumerate(units):
        if index in keep:
            if gap:
                result.append(_marker(gap))
                removed_total += gap
                gap = 0
            result.extend(unit)
        else:
            gap += len(unit)
    if gap:
        result.append(_marker(gap))
        removed_total += gap
    return result, removed_total


def _redacted(item: ContextItem) -> ContextItem:
    """Return the item with secrets redacted from its message (recounted if it changed)."""
    message = redact_message(item.message)
    if message == item.message:
        return item
    return replace(item, message=message, tokens=message_tokens(message))


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
) -> BuiltContext:
    """Load, pair and fit: the whole of what the model sees, from `loops` (oldest first).

    A session `digest` comes first, and fitting keeps it while the rest can still be
    made to fit beside it; otherwise it is left out like any other old message. With
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
    if redact_secrets:
        items = [_redacted(item) for item in items]
    items, interrupted, orphans = pair_tool_calls(items)
    items = merge_summaries(items)
    lead = [] if digest is None else [digest_item(digest)]
    loaded = math.ceil(sum(item.tokens for item in [*lead, *items]) * token_scale)
    items, trimmed = _fit_with_lead(lead, items, budget, token_scale)
    items = settle_roles(items)
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
