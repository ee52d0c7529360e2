"""Fitting a loaded context into its budget, losing least (pure).

`fit_context` takes what the loader assembled and paired (oldest first), with the
session digest in front, and returns what is sent. Each loop's run of summary messages,
with the restored file reads right after it, is shown as one framed message. When the
whole is over the budget, cuts are made in the order that loses least, each as far as
needed and no further (a binary search over how much it cuts), stopping at the first
that fits:

0. every summary after the first gets a shorter framing (`SUMMARY_MORE`), and the
   compression note its brief form;
1. bulky tool output is squeezed (progress marks and bars, repeated lines, long rules;
   `squeeze_output`), then cut to its first and last lines, down to
   `TOOL_OUTPUT_FLOOR` tokens a result; then the file reads restored after summaries
   (copies of tool output) are left out;
2. older raw turns are dropped, oldest first, as whole units (an assistant message with
   its tool results); the newest units within `TAIL_SHARE` of the budget are kept. A
   digest of exactly the dropped units (`sessionstore._build_digest`) stands for them,
   merged into the handoff right before them (else in a digest of its own there), up to
   `BUILD_DIGEST_SHARE` of the budget, and takes whatever room the cuts leave at the end;
3. summaries (the session digest and each loop's summary) are shortened one by one,
   older loops' first and the session digest last, down to `SUMMARY_FLOOR_SHARE` of the
   budget (a structured handoff is re-fitted by `fit_handoff`, other text keeps its
   first and last lines; restored file reads go first);
4. the newest raw turns are dropped, oldest first;
5. the system prompt is shortened by whole sentences (never cut inside one), then
   dropped;
6. the latest request's standing instructions (the harness's boilerplate around its
   task: notes, tips, response format, examples; `sessionstore._standing`) are
   shortened by whole sentences, the leading ones kept, with a marker where they were;
7. summaries are shortened to their smallest form, then dropped, loop summaries oldest
   first and the session digest last;
8. the session's task (the first request of the chain's first loop) is shortened, then
   dropped.

The system prompt and the request's standing instructions go before the summaries go
under their floor share: a summary smaller than that no longer holds the session's work,
and a context of instructions without it cannot go on.

The latest user request is never dropped and its task text never cut; when that, its
standing instructions left out, cannot fit with a trim marker, `ContextOverflowError`
says what was needed. The number of messages left out is said
once: in seed 001's compression note after the system prompt, else in the first
summary's framing, else in one trim marker where the first gap was. The note is sent
whenever the context holds compacted or trimmed turns and a system prompt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from sessionstore._build_digest import BUILD_DIGEST_SHARE, FoldedTurns
from sessionstore._fit_units import (
    Unit,
    UnitSummary,
    digest_unit,
    first_sentence_cost,
    group_units,
    make_fold_host,
    merge_summary_runs,
    request_parts,
    shorten_request,
    shorten_sentences,
    shorten_summary,
    summary_item,
)
from sessionstore._framing import (
    COMPRESSION_NOTE,
    COMPRESSION_NOTE_BRIEF,
    DIGEST_HEADER,
    TRIM_MARKER,
    framed,
    role_of,
    text_message,
)
from sessionstore._items import ContextItem
from sessionstore._tokens import message_tokens
from sessionstore.errors import ContextOverflowError
from sessionstore.models import (
    BashExecutionMessage,
    SessionDigest,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._passes import shorten_output, truncate_head_tail_tokens

__all__ = [
    "SUMMARY_FLOOR_SHARE",
    "SYSTEM_SHARE",
    "TAIL_SHARE",
    "TOOL_OUTPUT_FLOOR",
    "FitResult",
    "fit_context",
    "shorten_sentences",
    "shorten_summary",
]

TOOL_OUTPUT_FLOOR = 200
"""The fewest tokens a tool output is cut to before any turn is dropped."""
TAIL_SHARE = 0.5
"""The share of the budget the newest raw turns keep until summaries reach their floor."""
SUMMARY_FLOOR_SHARE = 0.5
"""The share of the budget a summary keeps until the newest raw turns are dropped."""
MIN_SUMMARY_TEXT = 24
"""The fewest tokens of summary text worth sending; below that a summary is dropped."""
SYSTEM_SHARE = 0.25
"""The share of the budget a system prompt keeps, by whole sentences, once older turns are
gone: a larger one cannot be sent whole beside the session's memory anyway."""


@dataclass(frozen=True, slots=True)
class FitResult:
    """What `fit_context` returns."""

    items: list[ContextItem]
    """The items to send, in order (roles still to be settled)."""
    trimmed: int
    """Messages left out to fit the budget."""
    loaded_tokens: int
    """What everything loaded costs, summaries framed, before any cut (unscaled)."""


@dataclass(frozen=True, slots=True)
class _State:
    brief: bool = False
    """Summaries after the first get the shorter framing (`SUMMARY_MORE`)."""
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
class _Rendered:
    items: list[ContextItem] = field(default_factory=list)
    trimmed: int = 0


def _is_output(item: ContextItem) -> bool:
    return isinstance(item.message, ToolResultMessage | BashExecutionMessage)


class _Fitter:
    def __init__(self, units: list[Unit], budget: int, token_scale: float) -> None:
        self.units = units
        self.budget = budget
        self.scale = token_scale
        self._outputs: dict[tuple[int, bool, int | None], ContextItem] = {}
        droppable = [i for i, unit in enumerate(units) if unit.kind == "raw"]
        # The newest raw units within the tail share (their output squeezed) are cut
        # and dropped after the others.
        tail: list[int] = []
        used = 0
        for index in reversed(droppable):
            size = sum(self.output(item, True, None).tokens for item in units[index].items)
            if (used + size) * token_scale > budget * TAIL_SHARE:
                break
            used += size
            tail.append(index)
        self.tail = set(tail)
        older = [i for i in droppable if i not in self.tail]
        self.drop_order = older + sorted(tail)
        self.older = len(older)
        summaries = [i for i, unit in enumerate(units) if unit.kind == "summary"]
        digests = [i for i in summaries if units[i].items == []]
        self.summary_order = [i for i in summaries if i not in digests] + digests
        self._summaries: dict[
            tuple[int, int | None, str | None, bool, int, bool], ContextItem | None
        ] = {}
        self.host, self.folded = self._fold_into()
        pinned = next((unit.items[0] for unit in units if unit.kind == "pinned"), None)
        shared = [
            item.message.text
            for unit in units
            if unit.kind == "system"
            for item in unit.items
            if isinstance(item.message, SystemMessage)
        ]
        self.request = None if pinned is None else request_parts(pinned, shared)
        self._requests: dict[int, ContextItem] = {}

    def _fold_into(self) -> tuple[int | None, FoldedTurns | None]:
        """Return the summary the dropped raw turns fold into, and their digests.

        The summary right before the first droppable turn, when it is a handoff the
        summarizer can update; else the placeholder `fit_context` put there.
        """
        if not self.drop_order:
            return None, None
        first = self.drop_order[0]
        host = next((i for i in range(first - 1, -1, -1) if self.units[i].kind == "summary"), None)
        if host is None:
            return None, None
        summary = self.units[host].summary
        assert summary is not None
        prior = None if summary.is_placeholder else "\n".join(summary.texts)
        units = [[item.message for item in self.units[i].items] for i in self.drop_order]
        covers = [
            tuple(raw_id for item in self.units[i].items for raw_id in item.covers)
            for i in self.drop_order
        ]
        return host, FoldedTurns(units, covers, prior)

    def folded_count(self, index: int, state: _State) -> int:
        """Return how many dropped raw units the summary at `index` stands for too."""
        return state.dropped if index == self.host else 0

    def summary_size(self, index: int, state: _State) -> int:
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
        if not squeeze or not _is_output(item):
            return item
        key = (id(item), squeeze, cap)
        cached = self._outputs.get(key)
        if cached is None:
            message = shorten_output(item.message, cap)
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
    ) -> ContextItem | None:
        key = (index, cap, note, more, folded, restored)
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
        result = self._fit_summary(summary, cap, note, more)
        self._summaries[key] = result
        return result

    def _fit_summary(
        self, summary: UnitSummary, cap: int | None, note: str | None, more: bool
    ) -> ContextItem | None:
        restored = list(summary.restored)
        item = summary_item(summary, summary.texts, restored, note, more)
        if cap is None or item.tokens <= cap:
            return item
        while restored:
            restored.pop(0)  # the oldest restored read goes first
            item = summary_item(summary, summary.texts, restored, note, more)
            if item.tokens <= cap:
                return item
        overhead = summary_item(summary, [""], [], note, more).tokens
        room = cap - overhead
        text = "\n".join(summary.texts)
        while room >= MIN_SUMMARY_TEXT:
            item = summary_item(summary, [shorten_summary(text, room)], [], note, more)
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

    def render(self, state: _State) -> _Rendered:
        units = self.units
        dropped_units = set(self.drop_order[: state.dropped])
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
                    cap = state.tail_cap if index in self.tail else state.tool_cap
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
        result = _Rendered(trimmed=trimmed)
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

    def _with_lost(self, state: _State, lost: list[int]) -> _Rendered:
        """Render with the summaries that cannot fit their cap dropped too."""
        order = self.summary_order
        count = max(order.index(index) for index in lost) + 1
        if count <= state.dropped_summaries:  # pragma: no cover - they were dropped already
            raise AssertionError("a dropped summary was rendered")
        return self.render(replace(state, dropped_summaries=count))

    def shortens_summaries(self, state: _State) -> bool:
        """True when `state` shows a summary shorter than it was loaded, or drops one."""
        return state.dropped_summaries > 0 or any(
            cap < self.units[index].size for index, cap in state.summary_caps
        )

    def cost(self, rendered: _Rendered) -> int:
        return math.ceil(sum(item.tokens for item in rendered.items) * self.scale)

    def fits(self, state: _State) -> bool:
        return self.cost(self.render(state)) <= self.budget

    # ── the ladder ────────────────────────────────────────────────────────────

    def largest(self, low: int, high: int, make: Callable[[int], _State]) -> int | None:
        """Return the largest value in [low, high] whose state fits, or None."""
        if high < low or not self.fits(make(low)):
            return None
        while low < high:
            middle = (low + high + 1) // 2
            if self.fits(make(middle)):
                low = middle
            else:
                high = middle - 1
        return low

    def smallest(self, low: int, high: int, make: Callable[[int], _State]) -> int | None:
        """Return the smallest value in [low, high] whose state fits, or None."""
        if high < low or not self.fits(make(high)):
            return None
        while low < high:
            middle = (low + high) // 2
            if self.fits(make(middle)):
                high = middle
            else:
                low = middle + 1
        return low

    def fit(self) -> tuple[_State, bool]:
        """Return the state that cuts least and fits, or the one that cuts most, and if it fits.

        The digest of the dropped turns then takes the room the cuts left, if any.
        """
        state, fits = self._cut()
        return (self.grow_folded(state), True) if fits else (state, False)

    def grow_folded(self, state: _State) -> _State:
        """Let the digest of the dropped raw turns grow into the room left unused."""
        host = self.host
        if host is None or not self.folded_count(host, state):
            return state
        caps = dict(state.summary_caps)
        current = caps.get(host, self.summary_size(host, state))
        whole = self.summary(
            host, None, folded=self.folded_count(host, state), restored=state.restored
        )
        assert whole is not None  # a summary with no cap is always rendered

        def capped(cap: int) -> _State:
            return replace(state, summary_caps=tuple({**caps, host: cap}.items()))

        if whole.tokens <= current:
            return state
        cap = self.largest(current, whole.tokens, capped)
        return state if cap is None else capped(cap)

    def _cut(self) -> tuple[_State, bool]:
        state = _State()
        if self.fits(state):
            return state, True
        state = replace(state, brief=True)
        if self.fits(state):
            return state, True
        state = replace(state, squeeze=True)
        if self.fits(state):
            return state, True
        state, fits = self.cap_outputs(state, "tool_cap", tail=False)
        if fits:
            return state, True
        steps: list[Callable[[_State], tuple[_State, bool]]] = [
            self.drop_restored,
            lambda s: self.drop(s, self.older),
            self.system_to_share,
            lambda s: self.shorten_summaries(s, self.summary_floor()),
            lambda s: self.cap_outputs(s, "tail_cap", tail=True),
            lambda s: self.drop(s, len(self.drop_order)),
            self.shorten_system,
            self.shorten_standing,
            lambda s: self.shorten_summaries(s, self.least_summary()),
            self.drop_summaries,
            self.shorten_task,
        ]
        for step in steps:
            state, fits = step(state)
            if fits:
                return state, True
        return state, False

    def cap_outputs(
        self, state: _State, field: Literal["tool_cap", "tail_cap"], *, tail: bool
    ) -> tuple[_State, bool]:
        """Cut the tool outputs of the older (or the newest) turns, as little as fits."""
        biggest = max(
            (
                self.output(item, True, None).tokens
                for index, unit in enumerate(self.units)
                if unit.kind == "raw" and (index in self.tail) == tail
                for item in unit.items
                if _is_output(item)
            ),
            default=0,
        )
        if biggest <= TOOL_OUTPUT_FLOOR:
            return state, False

        def capped(cap: int) -> _State:
            if field == "tail_cap":
                return replace(state, tail_cap=cap)
            return replace(state, tool_cap=cap)

        cap = self.largest(TOOL_OUTPUT_FLOOR, biggest - 1, capped)
        if cap is not None:
            return capped(cap), True
        return capped(TOOL_OUTPUT_FLOOR), False

    def drop_restored(self, state: _State) -> tuple[_State, bool]:
        """Leave out the file reads restored after summaries: copies of tool output."""
        if not any(unit.summary is not None and unit.summary.restored for unit in self.units):
            return state, False
        state = replace(state, restored=False)
        return state, self.fits(state)

    def drop(self, state: _State, high: int) -> tuple[_State, bool]:
        """Drop raw units in `drop_order`, as few as fit, up to `high` of them."""
        count = self.smallest(state.dropped, high, lambda k: replace(state, dropped=k))
        if count is None:
            return replace(state, dropped=max(state.dropped, high)), False
        return replace(state, dropped=count), True

    def summary_floor(self) -> int:
        return max(self.least_summary(), int(self.budget * SUMMARY_FLOOR_SHARE / self.scale))

    def least_summary(self) -> int:
        return MIN_SUMMARY_TEXT + message_tokens(text_message(framed(DIGEST_HEADER)))

    def shorten_summaries(self, state: _State, floor: int) -> tuple[_State, bool]:
        """Shorten summaries one by one, in `summary_order`, each as far as `floor` at most.

        Older loops' summaries are shortened first and the session digest last: the
        newest working state and the session's task are kept longest.
        """
        for index in self.summary_order:
            caps = dict(state.summary_caps)
            current = caps.get(index, self.summary_size(index, state))
            if current <= floor:
                continue

            def capped(
                cap: int, index: int = index, base: _State = state, caps: dict[int, int] = caps
            ) -> _State:
                return replace(base, summary_caps=tuple({**caps, index: cap}.items()))

            cap = self.largest(floor, current - 1, capped)
            if cap is not None:
                return capped(cap), True
            state = capped(floor)
        return state, self.fits(state)

    def drop_summaries(self, state: _State) -> tuple[_State, bool]:
        total = len(self.summary_order)
        count = self.smallest(
            state.dropped_summaries, total, lambda k: replace(state, dropped_summaries=k)
        )
        if count is None:
            return replace(state, dropped_summaries=total), False
        return replace(state, dropped_summaries=count), True

    def shorten_task(self, state: _State) -> tuple[_State, bool]:
        task = next((unit for unit in self.units if unit.kind == "task"), None)
        if task is not None:
            cap = self.largest(1, task.size - 1, lambda c: replace(state, task_cap=c))
            if cap is not None:
                return replace(state, task_cap=cap), True
        return replace(state, drop_task=True), False

    def system_to_share(self, state: _State) -> tuple[_State, bool]:
        """Shorten a system prompt over `SYSTEM_SHARE` of the budget, down to that share.

        Such a prompt cannot be sent whole beside the session's memory; it keeps its
        leading sentences within the share until nothing else is left to cut.
        """
        systems = [unit for unit in self.units if unit.kind == "system"]
        sizes = [unit.size for unit in systems]
        share = max(1, int(self.budget * SYSTEM_SHARE / self.scale))
        # Never less than its first sentence: the share shortens, it does not drop.
        share = max([share, *(first_sentence_cost(unit.items[0]) for unit in systems)])
        if not sizes or max(sizes) <= share:
            return state, False
        cap = self.largest(share, max(sizes) - 1, lambda c: replace(state, system_cap=c))
        if cap is not None:
            return replace(state, system_cap=cap), True
        return replace(state, system_cap=share), False

    def shorten_standing(self, state: _State) -> tuple[_State, bool]:
        """Shorten the latest request's standing instructions, as little as fits."""
        unit = next((unit for unit in self.units if unit.kind == "pinned"), None)
        if unit is None or self.request is None:
            return state, False
        least = self.pinned(unit.items[0], 0).tokens
        cap = self.largest(least, unit.size - 1, lambda c: replace(state, standing_cap=c))
        if cap is not None:
            return replace(state, standing_cap=cap), True
        return replace(state, standing_cap=least), False

    def shorten_system(self, state: _State) -> tuple[_State, bool]:
        sizes = [unit.size for unit in self.units if unit.kind == "system"]
        if sizes:
            top = max(sizes) if state.system_cap is None else state.system_cap
            cap = self.largest(1, top - 1, lambda c: replace(state, system_cap=c))
            if cap is not None:
                return replace(state, system_cap=cap), True
        return replace(state, system_cap=0), self.fits(replace(state, system_cap=0))


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


def fit_context(
    items: Sequence[ContextItem],
    budget: int,
    *,
    digest: SessionDigest | None = None,
    token_scale: float = 1.0,
    task_loop_id: int | None = None,
) -> FitResult:
    """Return the items to send within `budget`: summaries framed, cut in the order above.

    Args:
        items: The loaded, paired items, oldest first.
        budget: The tokens the messages may use.
        digest: The session digest, sent first.
        token_scale: Multiplies every count.
        task_loop_id: The chain's first loop when it is in scope: its first raw user
            message is the session's task.

    Raises:
        ContextOverflowError: the latest user request and one trim marker exceed the budget.
    """
    units = group_units(items, task_loop_id)
    if digest is not None:
        leading = next((i for i, unit in enumerate(units) if unit.kind != "system"), len(units))
        units.insert(leading, digest_unit(digest))
    loaded_units = list(units)
    make_fold_host(units)
    fitter = _Fitter(units, budget, token_scale)
    loaded = sum(item.tokens for item in fitter.render(_State()).items)
    state, fits = fitter.fit()
    if (not fits or fitter.shortens_summaries(state)) and (
        merged := merge_summary_runs(loaded_units)
    ) is not None:
        # Summaries must be shortened: adjacent ones are sent as one handoff instead, one
        # framing for all and the handoff fitter's priorities across the loops.
        make_fold_host(merged)
        other = _Fitter(merged, budget, token_scale)
        other_state, other_fits = other.fit()
        if other_fits or not fits:
            fitter, state, fits = other, other_state, other_fits
    rendered = fitter.render(state)
    if not fits:
        needed = fitter.cost(rendered)
        what = "the latest user request" if any(u.kind == "pinned" for u in units) else "a marker"
        raise ContextOverflowError(
            f"the smallest valid context ({what} and a trim marker) needs {needed} tokens, "
            f"but the budget leaves {budget}",
            needed=needed,
            available=budget,
        )
    return FitResult(rendered.items, rendered.trimmed, loaded)
