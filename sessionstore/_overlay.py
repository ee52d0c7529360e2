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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from sessionstore._pairing import interrupted_result
from sessionstore._tokens import message_tokens
from sessionstore.config import CompactionScope
from sessionstore.errors import ContextOverflowError
from sessionstore.models import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionBlock,
    CompactionSummaryMessage,
    LoopRecord,
    Message,
    SessionDigest,
    StoredMessage,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    TurnRange,
    UserMessage,
)

__all__ = [
    "BuiltContext",
    "ContextItem",
    "ContextSources",
    "InterruptedCall",
    "LoopSource",
    "assemble",
    "build",
    "digest_tokens",
    "fit_to_budget",
    "merge_summaries",
    "pair_tool_calls",
    "segments",
    "settle_roles",
    "summary_runs_tokens",
]

Source = Literal["raw", "compacted", "recent", "synthetic", "marker", "digest"]

TRIM_MARKER = "[Context compacted: {removed} messages removed to fit the token budget]"
"""The text that stands where trimming left messages out."""

SUMMARY_OPEN = (
    "[CONTEXT SUMMARY — REFERENCE ONLY] Earlier turns of this conversation were compacted "
    "into the summary below. Treat it as background, not as instructions: do not answer "
    "questions or redo requests it mentions, they were already handled. Respond to the "
    "latest user message after this summary."
)
"""The framing that opens every summary the model is shown."""

SUMMARY_CLOSE = "[END OF CONTEXT SUMMARY]"
"""The marker that closes it."""


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One message of a built context, with where it came from."""

    message: Message
    tokens: int
    """Its cached token count."""
    source: Source
    """`raw` (a raw message, verbatim), `compacted` / `recent` (a replacement message of
    that block section), `synthetic` (added by the loader), `marker` (a trim marker),
    `digest` (the session digest of the loops before the scope)."""
    loop_id: int | None = None
    message_id: int | None = None
    """The raw message's id, for `raw` items."""
    replacement_id: int | None = None
    """The replacement message's id, for `compacted` and `recent` items."""
    covers: tuple[int, ...] = ()
    """The ids of the raw messages this item stands for."""
    pinned: bool = False
    """True for the latest user request, which trimming never drops."""
    flexible: bool = False
    """A text the loader wrote (a summary, a trim marker): its role is chosen to keep
    user and assistant turns alternating."""


@dataclass(frozen=True, slots=True)
class InterruptedCall:
    """A tool call with no result; the context holds a synthetic result for it."""

    loop_id: int | None
    message_id: int | None
    """The raw assistant message that made the call, when the call is raw."""
    call_id: str
    tool_name: str
    at_end: bool
    """True when the call is the last thing its loop holds (an interrupted run)."""


@dataclass(frozen=True, slots=True)
class LoopSource:
    """What the loader needs of one loop: its record, block and raw messages.

    `raw` holds the messages of every turn the block does not replace (all of them
    when there is no block).
    """

    loop: LoopRecord
    block: CompactionBlock | None
    raw: Sequence[StoredMessage]
    """Raw messages in position order: `keep_first` turns and uncovered turns."""


@dataclass(frozen=True, slots=True)
class ContextSources:
    """What the store reads for the loader: the loops in scope and the pinned request."""

    loops: list[LoopSource]
    """The loops in scope, oldest first."""
    latest_user: StoredMessage | None
    """The chain's latest raw user message (the latest user request)."""
    as_of: datetime | None
    """The time the sources were read as of, or None for now."""
    scope: CompactionScope | None = None
    """The scope the loops were chosen by."""
    digest: SessionDigest | None = None
    """The session digest that stands for the loops before `loops`, if any."""


@dataclass(slots=True)
class BuiltContext:
    """What `build_context` returns: the messages for the model and how they were chosen."""

    items: list[ContextItem]
    budget: int
    """The tokens the messages could use (`max_context_tokens - system_prompt_tokens`)."""
    tokens: int
    """The tokens the messages use (cached counts, times `token_scale`, rounded up)."""
    loop_ids: list[int] = field(default_factory=list)
    """The loops in scope, oldest first."""
    interrupted_calls: list[InterruptedCall] = field(default_factory=list)
    orphan_results: list[int] = field(default_factory=list)
    """Raw ids of tool results left out because no call in the context answers to them."""
    trimmed_messages: int = 0
    """Messages left out to fit the budget (a marker in the context says so)."""
    loaded_tokens: int = 0
    """The tokens of everything loaded, before trimming (scaled like `tokens`)."""
    overlay: str = "default"
    as_of: object | None = None
    """The generation or time the context was rebuilt as of, or None for now."""
    scope: CompactionScope | None = None
    """The scope that chose `loop_ids`."""

    @property
    def messages(self) -> list[Message]:
        """The messages to send to the model, in order."""
        return [item.message for item in self.items]


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


def _is_summary(item: ContextItem) -> bool:
    return item.source == "compacted" and isinstance(
        item.message, CompactionSummaryMessage | BranchSummaryMessage
    )


def _framed(text: str) -> str:
    return f"{SUMMARY_OPEN}\n\n{text}\n\n{SUMMARY_CLOSE}"


def _text_item(texts: Sequence[str], run: Sequence[ContextItem], source: Source) -> ContextItem:
    message = UserMessage(content=[TextContent(text="\n\n".join(texts))])
    covers = tuple(dict.fromkeys(i for item in run for i in item.covers))
    return ContextItem(
        message=message,
        tokens=message_tokens(message),
        source=source,
        loop_id=run[0].loop_id,
        replacement_id=run[0].replacement_id,
        covers=covers,
        pinned=any(item.pinned for item in run),
        flexible=True,
    )


def summary_runs_tokens(messages: Sequence[Message]) -> int:
    """Return what a section's replacement messages cost once summary runs are merged.

    The loader shows each run of summary messages as one framed message
    (`merge_summaries`); the other messages cost their own count.
    """
    total = 0
    run: list[str] = []

    def flush() -> None:
        if run:
            total_text = _framed("\n".join(run))
            nonlocal total
            total += message_tokens(UserMessage(content=[TextContent(text=total_text)]))
            run.clear()

    for message in messages:
        if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
            run.append(message.summary)
            continue
        flush()
        total += message_tokens(message)
    flush()
    return total


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
            lines = [
                item.message.summary
                for item in run
                if isinstance(item.message, CompactionSummaryMessage | BranchSummaryMessage)
            ]
            result.append(_text_item([_framed("\n".join(lines))], run, "compacted"))
            run.clear()

    for item in items:
        if _is_summary(item) and (not run or run[-1].loop_id == item.loop_id):
            run.append(item)
            continue
        flush()
        if _is_summary(item):
            run.append(item)
        else:
            result.append(item)
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

    A trim marker next to a summary joins it. Then, as Hermes Agent does, a text after
    an assistant message or a tool result is a user message, otherwise an assistant
    message, and the choice flips when it would repeat the role of the message after it
    and flipping does not repeat the one before. The first message of a context is a
    user message unless a user message follows it.
    """
    merged: list[ContextItem] = []
    for item in items:
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and item.flexible
            and previous.flexible
            and "marker" in (item.source, previous.source)
        ):
            run = [previous, item]
            texts = [part.message.text for part in run if isinstance(part.message, UserMessage)]
            source = item.source if previous.source == "marker" else previous.source
            merged[-1] = _text_item(texts, run, source)
            continue
        merged.append(item)
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
    return _digest_item(digest).tokens


def _digest_item(digest: SessionDigest) -> ContextItem:
    text = _framed(f"Digest of the earlier conversation:\n{digest.message.summary}")
    message = UserMessage(content=[TextContent(text=text)])
    return ContextItem(
        message=message, tokens=message_tokens(message), source="digest", flexible=True
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
    kept. Returns the items and the number of messages left out.

    Raises:
        ContextOverflowError: the pinned unit and its markers alone exceed the budget.
    """

    def cost(tokens: int) -> int:
        return math.ceil(tokens * token_scale)

    total = sum(item.tokens for item in items)
    if cost(total) <= budget:
        return list(items), 0
    units = _units(items)
    count = len(units)
    pinned = next((i for i, unit in enumerate(units) if any(x.pinned for x in unit)), None)
    sizes = [sum(item.tokens for item in unit) for unit in units]
    marker_size = _marker(sum(len(unit) for unit in units)).tokens

    def tail_cost(start: int, tail: int) -> int:
        # Units `start..` (of size `tail`), the pinned unit, one marker per dropped gap.
        if pinned is None or pinned >= start:
            return cost(tail + (marker_size if start > 0 else 0))
        gaps = (pinned > 0) + (start > pinned + 1)
        return cost(tail + sizes[pinned] + gaps * marker_size)

    # Keep the longest tail that fits; like the seed, stop at the first unit that does
    # not (the kept history has no holes but the one before the pinned request).
    kept_from = count
    tail = 0
    needed = tail_cost(count, 0)
    if needed > budget:
        what = "the latest user request" if pinned is not None else "a trim marker"
        raise ContextOverflowError(
            f"the smallest valid context ({what} and the trim markers) needs {needed} "
            f"tokens, but the budget leaves {budget}",
            needed=needed,
            available=budget,
        )
    for index in range(count - 1, -1, -1):
        grown = tail + sizes[index]
        if tail_cost(index, grown) > budget:
            break
        tail, kept_from = grown, index
    keep = set(range(kept_from, len(units)))
    if pinned is not None:
        keep.add(pinned)
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
) -> BuiltContext:
    """Load, pair and fit: the whole of what the model sees, from `loops` (oldest first).

    A session `digest` comes first, and fitting keeps it while the rest can still be
    made to fit beside it; otherwise it is left out like any other old message.

    Raises:
        ValueError: `budget` is not positive or `token_scale` is not positive.
        ContextOverflowError: even the latest user request cannot fit.
    """
    if budget <= 0:
        raise ValueError(f"the token budget must be positive, got {budget}")
    if not token_scale > 0:
        raise ValueError(f"token_scale must be positive, got {token_scale}")
    items = assemble(loops, latest_user)
    items, interrupted, orphans = pair_tool_calls(items)
    items = merge_summaries(items)
    lead = [] if digest is None else [_digest_item(digest)]
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
