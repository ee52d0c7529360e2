"""Rendering one state of the fit: what `sessionstore._trim`'s ladder tries (pure).

A `FitState` says how far each cut has gone (outputs capped, raw units dropped, summaries
shortened or dropped, the system prompt, the request's standing instructions and the task
shortened); `Renderer.render` turns it into the items that would be sent, with the count of
messages left out said once (in the compression note, the first summary's framing or one
trim marker). `sessionstore._trim` searches the states for the one that cuts least and fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from sessionstore._build_digest import BUILD_DIGEST_SHARE, FoldedTurns
from sessionstore._fit_units import (
    Unit,
    UnitSummary,
    request_parts,
    shorten_request,
    shorten_sentences,
    shorten_summary,
    summary_item,
)
from sessionstore._framing import (
    COMPRESSION_NOTE,
    COMPRESSION_NOTE_BRIEF,
    TRIM_MARKER,
    role_of,
    text_message,
)
from sessionstore._items import ContextItem
from sessionstore._tokens import message_tokens
from sessionstore.models import (
    BashExecutionMessage,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._passes import shorten_output, truncate_head_tail_tokens
from sessionstore.summarizers._handoff import looks_like_handoff, parse_handoff

__all__ = ["MIN_SUMMARY_TEXT", "TAIL_SHARE", "FitState", "Rendered", "Renderer", "is_output"]

TAIL_SHARE = 0.5
"""The share of the budget the newest raw turns keep until summaries reach their floor."""
MIN_SUMMARY_TEXT = 24
"""The fewest tokens of summary text worth sending; below that a summary is dropped."""


@dataclass(frozen=True, slots=True)
class FitState:
    """How far each cut of the ladder has gone; the default cuts nothing."""

    brief: bool = False
    """Summaries after the first get the shorter framing (`SUMMARY_MORE`)."""
    terse: bool = False
    """The first summary gets the shorter framing too (`SUMMARY_OPEN_TERSE`)."""
    squeeze: bool = False
    tool_cap: int | None = None
    """The most tokens a tool output of an older turn keeps."""
    tail_cap: int | None = None
    """The same for the newest turns (those within `TAIL_SHARE`), which are cut later."""
    restored: bool = True
    """Summaries show the file reads restored after them (bulky output, cut before turns)."""
    dropped: int = 0
    """Raw units dropped, in `_Fitter.drop_order`."""
    summary_caps: tuple[tuple[int, int], ...] = ()
    """(unit index, cap) of the summaries shortened so far."""
    dropped_summaries: int = 0
    task_cap: int | None = None
    drop_task: bool = False
    system_cap: int | None = None
    standing_cap: int | None = None
    """The most tokens the latest request keeps, its standing instructions shortened."""


@dataclass(slots=True)
class Rendered:
    """The items a state shows, and how many messages it leaves out."""

    items: list[ContextItem] = field(default_factory=list)
    trimmed: int = 0


def is_output(item: ContextItem) -> bool:
    """True for a tool or shell output: what the first cuts shorten."""
    return isinstance(item.message, ToolResultMessage | BashExecutionMessage)


def _states_task(unit: Unit) -> bool:
    """Whether a summary's handoff states a task (not one that only continues it)."""
    if unit.summary is None:
        return False
    text = "\n".join(unit.summary.texts)
    return looks_like_handoff(text) and bool(parse_handoff(text).task)


class Renderer:
    """The units of a loaded context and what each state of the fit shows of them."""

    def __init__(self, units: list[Unit], budget: int, token_scale: float) -> None:
        self.units = units
        self.budget = budget
        self.scale = token_scale
        self._outputs: dict[tuple[int, bool, int | None], ContextItem] = {}
        self.droppable = [i for i, unit in enumerate(units) if unit.kind == "raw"]
        summaries = [i for i, unit in enumerate(units) if unit.kind == "summary"]
        digests = [i for i in summaries if units[i].items == []]
        loops = [i for i in summaries if i not in digests]
        # A loop's summary that states the task (the chain's first loops hold it) is
        # shortened after those that only continue it: the task is kept longest.
        tasks = [i for i in loops if _states_task(units[i])]
        self.summary_order = [i for i in loops if i not in tasks] + tasks + digests
        self._summaries: dict[
            tuple[int, int | None, str | None, bool, int, bool, bool], ContextItem | None
        ] = {}
        self.host = self._fold_host()
        """The summary the dropped raw turns fold into (see `folded`), or None."""
        self.pinned_unit = next((unit for unit in units if unit.kind == "pinned"), None)
        """The latest request's unit, when it is pinned (never dropped)."""
        pinned = None if self.pinned_unit is None else self.pinned_unit.items[0]
        shared = [
            item.message.text
            for unit in units
            if unit.kind == "system"
            for item in unit.items
            if isinstance(item.message, SystemMessage)
        ]
        self.system_texts = shared
        """The system prompts' texts (what a summary's constraints may repeat)."""
        self.request = None if pinned is None else request_parts(pinned, shared)
        self._requests: dict[int, ContextItem] = {}
        self._rendered: dict[FitState, Rendered] = {}

    # The order raw units are dropped in, and the digest of those dropped, are worked out
    # only when a state drops or caps them: a context that fits as loaded (most builds)
    # never squeezes every output of the tail to measure it.

    @cached_property
    def tail(self) -> frozenset[int]:
        """The newest raw units within the tail share (their output squeezed).

        They are cut and dropped after the others.
        """
        tail: list[int] = []
        used = 0
        for index in reversed(self.droppable):
            size = sum(self.output(item, True, None).tokens for item in self.units[index].items)
            if (used + size) * self.scale > self.budget * TAIL_SHARE:
                break
            used += size
            tail.append(index)
        return frozenset(tail)

    @cached_property
    def older(self) -> int:
        """How many raw units come before the tail (the first `older` of `drop_order`)."""
        return len(self.droppable) - len(self.tail)

    @cached_property
    def drop_order(self) -> list[int]:
        """The raw units in the order they are dropped: the older ones, then the tail."""
        tail = self.tail
        return [i for i in self.droppable if i not in tail] + sorted(tail)

    def _fold_host(self) -> int | None:
        """Return the summary the dropped raw turns fold into.

        The summary right before the first droppable turn (the first of `drop_order`
        whatever the tail), when it is a handoff the summarizer can update; else the
        placeholder `fit_context` put there.
        """
        if not self.droppable:
            return None
        first = self.droppable[0]
        return next((i for i in range(first - 1, -1, -1) if self.units[i].kind == "summary"), None)

    @cached_property
    def folded(self) -> FoldedTurns | None:
        """The digests of the dropped raw turns, for the summary at `host`."""
        host = self.host
        if host is None:
            return None
        summary = self.units[host].summary
        assert summary is not None
        prior = None if summary.is_placeholder else "\n".join(summary.texts)
        units = [[item.message for item in self.units[i].items] for i in self.drop_order]
        covers = [
            tuple(raw_id for item in self.units[i].items for raw_id in item.covers)
            for i in self.drop_order
        ]
        return FoldedTurns(units, covers, prior)

    def folded_count(self, index: int, state: FitState) -> int:
        """Return how many dropped raw units the summary at `index` stands for too."""
        return state.dropped if index == self.host else 0

    def summary_size(self, index: int, state: FitState) -> int:
        """Return the cap a summary is shown within before it is shortened (its own size).

        A summary that dropped turns fold into may grow to `BUILD_DIGEST_SHARE` of the
        budget, or its own size when larger.
        """
        size = self.units[index].size
        if self.folded_count(index, state):
            size = max(size, int(self.budget * BUILD_DIGEST_SHARE / self.scale))
        return size

    # ── rendering a state ─────────────────────────────────────────────────────

    def output(self, item: ContextItem, squeeze: bool, cap: int | None) -> ContextItem:
        if not squeeze or not is_output(item):
            return item
        key = (id(item), squeeze, cap)
        cached = self._outputs.get(key)
        if cached is None:
            if cap is None:
                message = shorten_output(item.message, None)
            else:  # squeezed once, whatever the caps tried: each cut is made from that
                squeezed = self.output(item, squeeze, None).message
                message = shorten_output(squeezed, cap, squeezed=True)
            cached = (
                item
                if message is item.message
                else replace(
                    item, message=message, tokens=message_tokens(message), source="shortened"
                )
            )
            if cached.tokens > item.tokens:
                cached = item
            self._outputs[key] = cached
        return cached

    def summary(
        self,
        index: int,
        cap: int | None,
        note: str | None = None,
        more: bool = False,
        folded: int = 0,
        restored: bool = True,
        terse: bool = False,
    ) -> ContextItem | None:
        key = (index, cap, note, more, folded, restored, terse)
        if key in self._summaries:
            return self._summaries[key]
        summary = self.units[index].summary
        assert summary is not None
        if folded:
            assert self.folded is not None
            summary = replace(
                summary,
                texts=[self.folded.text(folded)],
                covers=summary.covers + self.folded.covers(folded),
                source="built",
            )
        if not restored and summary.restored:
            summary = replace(summary, restored=[])
        result = self._fit_summary(summary, cap, note, more, terse)
        self._summaries[key] = result
        return result

    def _fit_summary(
        self, summary: UnitSummary, cap: int | None, note: str | None, more: bool, terse: bool
    ) -> ContextItem | None:
        restored = list(summary.restored)
        item = summary_item(summary, summary.texts, restored, note, more, terse)
        if cap is None or item.tokens <= cap:
            return item
        while restored:
            restored.pop(0)  # the oldest restored read goes first
            item = summary_item(summary, summary.texts, restored, note, more, terse)
            if item.tokens <= cap:
                return item
        overhead = summary_item(summary, [""], [], note, more, terse).tokens
        room = cap - overhead
        text = "\n".join(summary.texts)
        while room >= MIN_SUMMARY_TEXT:
            shortened = shorten_summary(text, room, self.system_texts)
            item = summary_item(summary, [shortened], [], note, more, terse)
            if item.tokens <= cap:
                return item
            room -= max(1, item.tokens - cap)
        return None

    def task(self, item: ContextItem, cap: int | None) -> ContextItem | None:
        if cap is None or item.tokens <= cap:
            return item
        assert isinstance(item.message, UserMessage)
        overhead = message_tokens(UserMessage(content=""))
        text = truncate_head_tail_tokens(item.message.text, max(cap - overhead, 0))
        if not text:
            return None
        message = UserMessage(content=[TextContent(text=text)])
        return replace(item, message=message, tokens=message_tokens(message), source="shortened")

    def system(self, item: ContextItem, cap: int | None) -> ContextItem | None:
        if cap is None or item.tokens <= cap:
            return item
        assert isinstance(item.message, SystemMessage)
        text = shorten_sentences(item.message.text, cap)
        if not text:
            return None
        message = item.message.model_copy(update={"content": [TextContent(text=text)]})
        return replace(item, message=message, tokens=message_tokens(message), source="shortened")

    def pinned(self, item: ContextItem, cap: int | None) -> ContextItem:
        if cap is None or self.request is None or item.tokens <= cap:
            return item
        if cap not in self._requests:
            self._requests[cap] = shorten_request(item, self.request, cap)
        return self._requests[cap]

    def render(self, state: FitState) -> Rendered:
        """Return what `state` shows (kept: the fit renders the loaded state three times)."""
        rendered = self._rendered.get(state)
        if rendered is None:
            rendered = self._rendered[state] = self._render(state)
        return rendered

    def _render(self, state: FitState) -> Rendered:
        units = self.units
        dropped_units = set(self.drop_order[: state.dropped]) if state.dropped else set()
        dropped_units.update(self.summary_order[: state.dropped_summaries])
        kept: list[tuple[int, list[ContextItem] | None]] = []
        trimmed = 0
        gaps: list[int] = []
        """Positions in `kept` that messages were left out before."""
        shortened = False
        for index, unit in enumerate(units):
            if (
                unit.summary is not None
                and unit.summary.is_placeholder
                and (index in dropped_units or not self.folded_count(index, state))
            ):
                continue  # the dropped turns it stands for are counted already
            if index in dropped_units or (unit.kind == "task" and state.drop_task):
                trimmed += len(unit.items) or 1
                gaps.append(len(kept))
                continue
            if unit.kind == "summary":
                kept.append((index, None))  # rendered below, once the note is known
                continue
            shown_items: list[ContextItem] = []
            for item in unit.items:
                if unit.kind == "system":
                    fitted = self.system(item, state.system_cap)
                elif unit.kind == "task":
                    fitted = self.task(item, state.task_cap)
                elif unit.kind == "pinned":
                    fitted = self.pinned(item, state.standing_cap)
                else:
                    cap = state.tool_cap
                    if state.tail_cap != cap and index in self.tail:
                        cap = state.tail_cap
                    fitted = self.output(item, state.squeeze, cap)
                if fitted is None:
                    trimmed += 1
                    continue
                shortened = shortened or fitted is not item
                shown_items.append(fitted)
            if shown_items:
                kept.append((index, shown_items))
            else:
                gaps.append(len(kept))
        summaries = [index for index, shown in kept if shown is None]
        caps = {
            index: self.summary_size(index, state)
            for index in summaries
            if self.folded_count(index, state)
        }
        caps.update(state.summary_caps)
        system_at = next(
            (
                position
                for position, (index, shown) in enumerate(kept)
                if shown and units[index].kind == "system"
            ),
            None,
        )
        trim_note = TRIM_MARKER.format(removed=trimmed) if trimmed else None
        compacted = bool(summaries) or trimmed > 0 or shortened
        result = Rendered(trimmed=trimmed)
        # The count goes where the one marker keeps turns alternating, else in the
        # compression note, else in the first summary's framing, else where the first
        # gap is.
        joining = next((gap for gap in gaps if _joins_same_roles(kept, gap)), None)
        host_summary = None
        if joining is None and system_at is None and trim_note is not None:
            host_summary = summaries[0] if summaries else None
        rendered_summaries: dict[int, ContextItem | None] = {
            index: self.summary(
                index,
                caps.get(index),
                trim_note if index == host_summary else None,
                more=state.brief and index != summaries[0],
                folded=self.folded_count(index, state),
                restored=state.restored,
                terse=state.terse and index == summaries[0],
            )
            for index in summaries
        }
        if host_summary is not None and rendered_summaries[host_summary] is None:
            # Too small to carry the note: it goes in a marker.
            rendered_summaries[host_summary] = self.summary(
                host_summary,
                caps.get(host_summary),
                more=state.brief and host_summary != summaries[0],
                folded=self.folded_count(host_summary, state),
                restored=state.restored,
                terse=state.terse and host_summary == summaries[0],
            )
            host_summary = None
        lost = [index for index, item in rendered_summaries.items() if item is None]
        if lost:
            # A summary with no room even for its smallest form is left out.
            return self._with_lost(state, lost)
        marker_at = None
        if trim_note is not None and joining is not None:
            marker_at = joining
        elif trim_note is not None and system_at is None and host_summary is None:
            marker_at = gaps[0] if gaps else 0
        note_count = trim_note if marker_at is None else None
        for position, (index, shown) in enumerate(kept):
            if position == marker_at:
                result.items.append(_marker(trim_note or ""))
            if shown is not None:
                result.items.extend(shown)
            elif (summary_item := rendered_summaries[index]) is not None:
                result.items.append(summary_item)
            if position == system_at and compacted:
                result.items.append(_note(note_count, brief=state.brief))
        if marker_at is not None and marker_at >= len(kept):
            result.items.append(_marker(trim_note or ""))
        return result

    def _with_lost(self, state: FitState, lost: list[int]) -> Rendered:
        """Render with the summaries that cannot fit their cap dropped too."""
        order = self.summary_order
        count = max(order.index(index) for index in lost) + 1
        if count <= state.dropped_summaries:  # pragma: no cover - they were dropped already
            raise AssertionError("a dropped summary was rendered")
        return self.render(replace(state, dropped_summaries=count))

    def shortens_summaries(self, state: FitState) -> bool:
        """True when `state` shows a summary shorter than it was loaded, or drops one.

        A terse framing does not count: the summaries still say all they said.
        """
        return state.dropped_summaries > 0 or any(
            cap < self.units[index].size for index, cap in state.summary_caps
        )

    def cost(self, rendered: Rendered) -> int:
        return math.ceil(sum(item.tokens for item in rendered.items) * self.scale)

    def fits(self, state: FitState) -> bool:
        return self.cost(self.render(state)) <= self.budget


def _joins_same_roles(kept: Sequence[tuple[int, list[ContextItem] | None]], gap: int) -> bool:
    """True when the gap at `gap` leaves two user (or two assistant) messages side by side."""
    if gap <= 0 or gap >= len(kept):
        return False
    before, after = kept[gap - 1][1], kept[gap][1]
    if not before or not after:
        return False
    first, second = role_of(before[-1].message), role_of(after[0].message)
    return first == second and first in ("user", "assistant")


def _marker(text: str) -> ContextItem:
    message = text_message(text)
    return ContextItem(
        message=message, tokens=message_tokens(message), source="marker", flexible=True
    )


def _note(trim_note: str | None, *, brief: bool) -> ContextItem:
    note = COMPRESSION_NOTE_BRIEF if brief else COMPRESSION_NOTE
    text = note if trim_note is None else f"{note}\n{trim_note}"
    message = SystemMessage.model_construct(content=[TextContent.model_construct(text=text)])
    return ContextItem(message=message, tokens=message_tokens(message), source="synthetic")
