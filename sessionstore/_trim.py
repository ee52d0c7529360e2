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
3. the first summary's framing takes its terse form (`SUMMARY_OPEN_TERSE`); then
   summaries (the session digest and each loop's summary) are shortened one by one,
   older loops' first (those that state the task after those that continue it) and the
   session digest last, down to `SUMMARY_FLOOR_SHARE` of the
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from sessionstore._fit_render import MIN_SUMMARY_TEXT, TAIL_SHARE, FitState, Renderer, is_output
from sessionstore._fit_units import (
    Unit,
    digest_unit,
    first_sentence_cost,
    fold_between_summaries,
    group_units,
    make_fold_host,
    merge_summary_runs,
    shorten_sentences,
    shorten_summary,
)
from sessionstore._framing import DIGEST_HEADER, framed, text_message
from sessionstore._items import ContextItem
from sessionstore._tokens import message_tokens
from sessionstore.errors import ContextOverflowError
from sessionstore.models import SessionDigest

__all__ = [
    "MIN_SUMMARY_TEXT",
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
SUMMARY_FLOOR_SHARE = 0.5
"""The share of the budget a summary keeps until the newest raw turns are dropped."""
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


class _Fitter(Renderer):
    """The ladder of cuts: each step as far as needed and no further."""

    # ── the ladder ────────────────────────────────────────────────────────────

    def largest(self, low: int, high: int, make: Callable[[int], FitState]) -> int | None:
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

    def smallest(self, low: int, high: int, make: Callable[[int], FitState]) -> int | None:
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

    def fit(self) -> tuple[FitState, bool]:
        """Return the state that cuts least and fits, or the one that cuts most, and if it fits.

        The digest of the dropped turns then takes the room the cuts left, if any.
        """
        state, fits = self._cut()
        return (self.grow_folded(state), True) if fits else (state, False)

    def grow_folded(self, state: FitState) -> FitState:
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

        def capped(cap: int) -> FitState:
            return replace(state, summary_caps=tuple({**caps, host: cap}.items()))

        if whole.tokens <= current:
            return state
        cap = self.largest(current, whole.tokens, capped)
        return state if cap is None else capped(cap)

    def _cut(self) -> tuple[FitState, bool]:
        state = FitState()
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
        steps: list[Callable[[FitState], tuple[FitState, bool]]] = [
            self.drop_restored,
            lambda s: self.drop(s, self.older),
            self.system_to_share,
            self.terse_framing,
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
        self, state: FitState, field: Literal["tool_cap", "tail_cap"], *, tail: bool
    ) -> tuple[FitState, bool]:
        """Cut the tool outputs of the older (or the newest) turns, as little as fits."""
        biggest = max(
            (
                self.output(item, True, None).tokens
                for index, unit in enumerate(self.units)
                if unit.kind == "raw" and (index in self.tail) == tail
                for item in unit.items
                if is_output(item)
            ),
            default=0,
        )
        if biggest <= TOOL_OUTPUT_FLOOR:
            return state, False

        def capped(cap: int) -> FitState:
            if field == "tail_cap":
                return replace(state, tail_cap=cap)
            return replace(state, tool_cap=cap)

        cap = self.largest(TOOL_OUTPUT_FLOOR, biggest - 1, capped)
        if cap is not None:
            return capped(cap), True
        return capped(TOOL_OUTPUT_FLOOR), False

    def drop_restored(self, state: FitState) -> tuple[FitState, bool]:
        """Leave out the file reads restored after summaries: copies of tool output."""
        if not any(unit.summary is not None and unit.summary.restored for unit in self.units):
            return state, False
        state = replace(state, restored=False)
        return state, self.fits(state)

    def drop(self, state: FitState, high: int) -> tuple[FitState, bool]:
        """Drop raw units in `drop_order`, as few as fit, up to `high` of them."""
        count = self.smallest(state.dropped, high, lambda k: replace(state, dropped=k))
        if count is None:
            return replace(state, dropped=max(state.dropped, high)), False
        return replace(state, dropped=count), True

    def summary_floor(self) -> int:
        return max(self.least_summary(), int(self.budget * SUMMARY_FLOOR_SHARE / self.scale))

    def least_summary(self) -> int:
        return MIN_SUMMARY_TEXT + message_tokens(text_message(framed(DIGEST_HEADER, terse=True)))

    def shorten_summaries(self, state: FitState, floor: int) -> tuple[FitState, bool]:
        """Shorten summaries one by one, in `summary_order`, each as far as `floor` at most.

        Older loops' summaries are shortened first (those that state the task after
        those that continue it) and the session digest last: the newest working state
        and the session's task are kept longest.
        """
        for index in self.summary_order:
            caps = dict(state.summary_caps)
            current = caps.get(index, self.summary_size(index, state))
            if current <= floor:
                continue

            def capped(
                cap: int, index: int = index, base: FitState = state, caps: dict[int, int] = caps
            ) -> FitState:
                return replace(base, summary_caps=tuple({**caps, index: cap}.items()))

            cap = self.largest(floor, current - 1, capped)
            if cap is not None:
                return capped(cap), True
            state = capped(floor)
        return state, self.fits(state)

    def terse_framing(self, state: FitState) -> tuple[FitState, bool]:
        """Frame the first summary tersely: its tokens go to what it says, not how."""
        if not any(unit.kind == "summary" for unit in self.units):
            return state, False
        state = replace(state, terse=True)
        return state, self.fits(state)

    def drop_summaries(self, state: FitState) -> tuple[FitState, bool]:
        total = len(self.summary_order)
        count = self.smallest(
            state.dropped_summaries, total, lambda k: replace(state, dropped_summaries=k)
        )
        if count is None:
            return replace(state, dropped_summaries=total), False
        return replace(state, dropped_summaries=count), True

    def shorten_task(self, state: FitState) -> tuple[FitState, bool]:
        task = next((unit for unit in self.units if unit.kind == "task"), None)
        if task is not None:
            cap = self.largest(1, task.size - 1, lambda c: replace(state, task_cap=c))
            if cap is not None:
                return replace(state, task_cap=cap), True
        return replace(state, drop_task=True), False

    def system_to_share(self, state: FitState) -> tuple[FitState, bool]:
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

    def shorten_standing(self, state: FitState) -> tuple[FitState, bool]:
        """Shorten the latest request's standing instructions, as little as fits."""
        unit = self.pinned_unit
        if unit is None or self.request is None:
            return state, False
        least = self.pinned(unit.items[0], 0).tokens
        cap = self.largest(least, unit.size - 1, lambda c: replace(state, standing_cap=c))
        if cap is not None:
            return replace(state, standing_cap=cap), True
        return replace(state, standing_cap=least), False

    def shorten_system(self, state: FitState) -> tuple[FitState, bool]:
        sizes = [unit.size for unit in self.units if unit.kind == "system"]
        if sizes:
            top = max(sizes) if state.system_cap is None else state.system_cap
            cap = self.largest(1, top - 1, lambda c: replace(state, system_cap=c))
            if cap is not None:
                return replace(state, system_cap=cap), True
        return replace(state, system_cap=0), self.fits(replace(state, system_cap=0))


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
    loaded = sum(item.tokens for item in fitter.render(FitState()).items)
    state, fits = fitter.fit()
    # Summaries must be shortened: adjacent ones are sent as one handoff instead, one
    # framing for all and the handoff fitter's priorities across the loops.
    fitter, state, fits = _try_units(
        fitter, state, fits, lambda: merge_summary_runs(loaded_units), budget, token_scale
    )
    # The turns between two loops' handoffs that are dropped anyway: one handoff stands
    # for all of them, the turns folded in where they were. Whether or not summaries
    # shorten: else those turns fold into the first handoff, before the loops after them.
    # A fit that drops nothing has no such turns: the drop order (a pass over every
    # unit, a third of building a large context that fits) is not worked out for it.
    fitter, state, fits = _try_units(
        fitter,
        state,
        fits,
        lambda: (
            fold_between_summaries(fitter.units, set(fitter.drop_order[: state.dropped]))
            if state.dropped
            else None
        ),
        budget,
        token_scale,
        always=True,
    )
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


def _try_units(
    fitter: _Fitter,
    state: FitState,
    fits: bool,
    other_units: Callable[[], list[Unit] | None],
    budget: int,
    token_scale: float,
    *,
    always: bool = False,
) -> tuple[_Fitter, FitState, bool]:
    """Fit `other_units` when the fit so far must shorten summaries; keep it if it fits.

    `other_units` is called only then (`always`: whatever the fit so far), and may say
    None (nothing to regroup).
    """
    if fits and not always and not fitter.shortens_summaries(state):
        return fitter, state, fits
    units = other_units()
    if units is None:
        return fitter, state, fits
    make_fold_host(units)
    other = _Fitter(units, budget, token_scale)
    other_state, other_fits = other.fit()
    if other_fits or not fits:
        return other, other_state, other_fits
    return fitter, state, fits
