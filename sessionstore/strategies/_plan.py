"""Boundaries: which messages a compaction may fold, and which it must keep verbatim.

All of it is pure index arithmetic over a sequence of messages; nothing is copied.

- `split_history` (seeds 001 and 002): a protected head, a middle to fold and a tail
  protected by a token budget, as a `CompressionPlan` (`Compress` or `NoCompression`).
- `plan_slice` and `fit_suffix` (seed 003): the largest suffix that fits a budget, by
  prefix sums and a binary search.
- `forced_boundary` (seed 003): where a forced `/compact` cuts, the last user turn.
- `sanitize_orphans` (seeds 001 and 002): the last line of defence, which drops tool
  results that answer no call and gives every unanswered call a synthetic result.

No boundary splits a unit (an assistant message and the tool results that answer it),
and the latest user message is never folded.

>>> from sessionstore.models import AssistantMessage, UserMessage
>>> history = [UserMessage(content="task"), *[AssistantMessage(content="x" * 400)] * 8]
>>> history.append(UserMessage(content="next"))
>>> split_history(history, protect_first_n=2, tail_token_budget=250)
Compress(head=range(0, 2), middle=range(2, 6), tail=range(6, 10))
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias, TypeVar

from sessionstore._pairing import INTERRUPTED_RESULT
from sessionstore._tokens import TokenCounter, message_tokens
from sessionstore.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._units import unit_starts

__all__ = [
    "DEFAULT_TAIL_TOKEN_BUDGET",
    "Compress",
    "CompressionPlan",
    "NoCompression",
    "OrphanReport",
    "SlicePlanner",
    "fit_suffix",
    "forced_boundary",
    "plan_slice",
    "prefix_tokens",
    "sanitize_orphans",
    "split_history",
]

_T = TypeVar("_T")

DEFAULT_TAIL_TOKEN_BUDGET = 6000
"""Tokens of recent messages kept verbatim: seed 003's `keep_recent` (`BudgetPolicy`)."""


@dataclass(frozen=True, slots=True)
class Compress:
    """Fold `middle`; keep `head` and `tail` verbatim. The three ranges partition the input."""

    head: range
    middle: range
    tail: range
    middle_tokens: int = field(default=0, compare=False, repr=False)
    """The tokens of the middle, as the plan counted them."""
    tail_tokens: int = field(default=0, compare=False, repr=False)
    """The tokens of the tail, as the plan counted them."""

    def __post_init__(self) -> None:
        if any(part.step != 1 for part in (self.head, self.middle, self.tail)):
            raise ValueError("the head, middle and tail must be ranges with step 1")
        if not (
            self.head.start == 0
            and self.head.stop == self.middle.start
            and self.middle.stop == self.tail.start
            and self.head.stop <= self.middle.stop <= self.tail.stop
        ):
            raise ValueError(
                f"the head, middle and tail must be contiguous from 0, got {self.head}, "
                f"{self.middle}, {self.tail}"
            )
        if not self.middle:
            raise ValueError("a Compress plan needs a non-empty middle; use NoCompression")

    def split(self, messages: Sequence[_T]) -> tuple[list[_T], list[_T], list[_T]]:
        """Return the head, middle and tail of `messages` (the sequence the plan was made for).

        Raises:
            ValueError: `messages` does not have the length the plan covers.
        """
        if len(messages) != self.tail.stop:
            raise ValueError(
                f"the plan covers {self.tail.stop} messages, but {len(messages)} were given"
            )
        return (
            list(messages[self.head.start : self.head.stop]),
            list(messages[self.middle.start : self.middle.stop]),
            list(messages[self.tail.start : self.tail.stop]),
        )


@dataclass(frozen=True, slots=True)
class NoCompression:
    """Nothing is worth folding; `reason` says why."""

    reason: str


CompressionPlan: TypeAlias = Compress | NoCompression
"""What `split_history`, `plan_slice` and friends decide: fold a middle, or nothing."""


def _counts(messages: Sequence[Message], counter: TokenCounter | None) -> list[int]:
    count = message_tokens if counter is None else counter.count_message
    return [count(message) for message in messages]


def _check_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")


def _last_user(messages: Sequence[Message]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return index
    return None


def _head_end(messages: Sequence[Message], starts: Sequence[int], protect_first_n: int) -> int:
    """Return the end of the head: the first `protect_first_n` and leading system messages.

    It is widened forward to the end of the unit that holds the last of them.
    """
    leading = 0
    while leading < len(messages) and isinstance(messages[leading], SystemMessage):
        leading += 1
    bounds = [*starts, len(messages)]
    return bounds[bisect.bisect_left(bounds, min(max(protect_first_n, leading), len(messages)))]


# ── head / middle / tail ───────────────────────────────────────────────────────


def split_history(
    messages: Sequence[Message],
    *,
    protect_first_n: int = 3,
    tail_token_budget: int = DEFAULT_TAIL_TOKEN_BUDGET,
    min_tail_messages: int = 3,
    soft_ceiling: float = 1.5,
    min_middle_messages: int = 2,
    counter: TokenCounter | None = None,
) -> CompressionPlan:
    """Split a history into a protected head, a middle to fold and a protected tail.

    Seed 001's boundaries, in unit steps so that no cut ever splits a tool call from
    its results:

    - **head**: the first `protect_first_n` messages (the system prompt and the first
      exchange) and any leading system messages, widened forward to the end of the
      unit the count ends in;
    - **tail**: walking back from the end a unit at a time, the newest units that fit
      `tail_token_budget`; the unit that crosses the budget is kept whole when the tail
      stays within `soft_ceiling` times the budget (rather than cutting it), and the
      tail always holds at least `min_tail_messages` messages;
    - the **latest user message** is always kept: when it would fall in the middle, the
      tail starts at it instead (seed 001's fix for a compaction that lost the task);
    - **middle**: everything between.

    Args:
        messages: The history; not changed.
        protect_first_n: Messages kept at the start (seed 001: 3).
        tail_token_budget: Tokens of recent messages to keep verbatim.
        min_tail_messages: The fewest messages the tail holds (seed 001: 3).
        soft_ceiling: How far past the budget the unit crossing it may go (seed 001: 1.5).
        min_middle_messages: A smaller middle is not worth a summary.
        counter: Counts message tokens (the seed heuristic by default).

    Returns:
        `Compress(head, middle, tail)` by index ranges, or `NoCompression(reason)` when the
        middle would be empty or smaller than `min_middle_messages`, or when everything
        after the head fits the tail budget.

    Raises:
        ValueError: a count or the budget is negative, or `soft_ceiling` is below 1.
    """
    for name, value in (
        ("protect_first_n", protect_first_n),
        ("tail_token_budget", tail_token_budget),
        ("min_tail_messages", min_tail_messages),
        ("min_middle_messages", min_middle_messages),
    ):
        _check_int(name, value)
    if not soft_ceiling >= 1.0:
        raise ValueError(f"soft_ceiling must be at least 1.0, got {soft_ceiling}")
    length = len(messages)
    if length == 0:
        return NoCompression("there are no messages")
    starts = unit_starts(messages)
    head_end = _head_end(messages, starts, protect_first_n)
    bounds = [*starts, length]
    if head_end >= length:
        return NoCompression(f"all {length} messages are in the protected head")
    counts = _counts(messages, counter)
    ceiling = tail_token_budget * soft_ceiling

    # Walk back a unit at a time; `cut` is where the tail starts. Once the tail holds
    # its minimum, a unit is added only while the tail is under the budget, and only if
    # the tail stays within the soft ceiling.
    cut = length
    used = 0
    unit_ends = dict(itertools.pairwise(bounds))
    for start in reversed(starts):
        if start < head_end:
            break
        size = sum(counts[start : unit_ends[start]])
        if length - cut >= min_tail_messages and (
            used >= tail_token_budget or used + size > ceiling
        ):
            break
        cut, used = start, used + size
    if cut <= head_end:
        if used > ceiling:
            reason = f"the tail's minimum of {min_tail_messages} message(s) reaches the head"
        else:
            reason = (
                f"everything after the head ({used} tokens) fits the tail budget "
                f"({tail_token_budget} tokens, up to {soft_ceiling:g}x for a whole unit)"
            )
        return NoCompression(reason)

    last_user = _last_user(messages)
    if last_user is not None and head_end <= last_user < cut:
        cut = last_user
    middle = range(head_end, cut)
    if len(middle) < max(min_middle_messages, 1):
        where = "the latest user message" if cut == last_user else "the protected tail"
        return NoCompression(
            f"only {len(middle)} message(s) between the head and {where}; "
            f"at least {max(min_middle_messages, 1)} are needed to be worth a summary"
        )
    return Compress(
        range(0, head_end),
        middle,
        range(cut, length),
        middle_tokens=sum(counts[head_end:cut]),
        tail_tokens=sum(counts[cut:]),
    )


# ── prefix sums and binary search ──────────────────────────────────────────────


def prefix_tokens(token_counts: Sequence[int]) -> list[int]:
    """Return the forward cumulative token counts: `result[i]` is the sum of `counts[:i]`.

    The list has `len(token_counts) + 1` entries and starts at 0 (seed 003).

    Raises:
        ValueError: a count is negative.
    """
    prefix = [0]
    total = 0
    for count in token_counts:
        if count < 0:
            raise ValueError(f"token counts must not be negative, got {count}")
        total += count
        prefix.append(total)
    return prefix


class SlicePlanner:
    """Answers "which suffix fits this budget?" in O(log n), after an O(n) prefix sum.

    Args:
        token_counts: The token count of each message.
        unit_starts: The indices a suffix may start at (`unit_starts(messages)`), ascending;
            every index when None.

    Raises:
        ValueError: a count is negative, or `unit_starts` is not ascending within range.
    """

    def __init__(self, token_counts: Sequence[int], unit_starts: Sequence[int] | None = None):
        self._prefix = prefix_tokens(token_counts)
        length = len(token_counts)
        if unit_starts is None:
            self._starts: Sequence[int] = range(length + 1)
        else:
            if any(not 0 <= s < length for s in unit_starts) or any(
                a >= b for a, b in itertools.pairwise(unit_starts)
            ):
                raise ValueError("unit_starts must be ascending indices of the counts")
            self._starts = [*unit_starts, length]

    @property
    def total(self) -> int:
        """The tokens of all messages."""
        return self._prefix[-1]

    def tokens(self, start: int, stop: int) -> int:
        """Return the tokens of messages `start..stop` (half-open)."""
        return self._prefix[stop] - self._prefix[start]

    def fit(self, budget: int) -> int:
        """Return the smallest allowed start whose suffix fits `budget` (the length if none).

        Raises:
            ValueError: `budget` is negative.
        """
        _check_int("budget", budget)
        need = self.total - budget
        prefix = self._prefix
        index = bisect.bisect_left(self._starts, need, key=lambda start: prefix[start])
        return self._starts[index]


def fit_suffix(
    token_counts: Sequence[int], budget: int, *, unit_starts: Sequence[int] | None = None
) -> int:
    """Return where the largest suffix of `token_counts` that fits `budget` starts.

    Seed 003's slice planner: prefix sums, then a binary search for the smallest start
    `s` with `sum(token_counts[s:]) <= budget`, among `unit_starts` when given (so the
    suffix never starts inside a unit). Returns `len(token_counts)` when not even the
    last unit fits.

    >>> fit_suffix([5, 1, 1, 1], 3)
    1
    >>> fit_suffix([5, 1, 1, 1], 2, unit_starts=[0, 1, 3])
    3

    Raises:
        ValueError: `budget` or a count is negative, or `unit_starts` is not ascending.
    """
    return SlicePlanner(token_counts, unit_starts).fit(budget)


def plan_slice(
    messages: Sequence[Message],
    *,
    keep_recent: int = DEFAULT_TAIL_TOKEN_BUDGET,
    protect_first_n: int = 0,
    counter: TokenCounter | None = None,
) -> CompressionPlan:
    """Keep the largest suffix of whole units that fits `keep_recent` tokens; fold the rest.

    Seed 003's `plan_slice`: prefix sums and a binary search (`SlicePlanner`) find the
    cut. Leading system messages and the first `protect_first_n` messages stay in a
    head, as in `split_history` (seed 003 has none). The latest user message is always
    kept: when the budget would fold it, the cut moves back to it. So a long tool loop
    after a single request can be folded only when the request is in the head
    (`protect_first_n=2` for a system prompt and one request).

    Returns:
        `Compress(head, middle, tail)`, or `NoCompression` when nothing is left to fold.

    Raises:
        ValueError: `keep_recent` or `protect_first_n` is negative.
    """
    _check_int("keep_recent", keep_recent)
    _check_int("protect_first_n", protect_first_n)
    length = len(messages)
    counts = _counts(messages, counter)
    starts = unit_starts(messages)
    head_end = _head_end(messages, starts, protect_first_n)
    planner = SlicePlanner(counts, starts)
    cut = max(planner.fit(keep_recent), head_end)
    last_user = _last_user(messages)
    if last_user is not None and head_end <= last_user < cut:
        cut = last_user
    if cut <= head_end:
        if planner.tokens(head_end, length) <= keep_recent:
            reason = (
                f"the {length - head_end} message(s) after the head "
                f"({planner.tokens(head_end, length)} tokens) fit keep_recent ({keep_recent})"
            )
        else:
            reason = "the latest user message starts right after the head; nothing to fold"
        return NoCompression(reason)
    return Compress(
        range(0, head_end),
        range(head_end, cut),
        range(cut, length),
        middle_tokens=planner.tokens(head_end, cut),
        tail_tokens=planner.tokens(cut, length),
    )


def forced_boundary(messages: Sequence[Message]) -> int | None:
    """Return the index of the last user message, where a forced `/compact` cuts.

    Everything before it may be folded (seed 003's `last_user_turn_start`); 0 means
    there is nothing before it, None that there is no user message at all.
    """
    return _last_user(messages)


# ── orphans ────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class OrphanReport:
    """What `sanitize_orphans` changed."""

    sources: tuple[int | None, ...]
    """For each output message, the input index it is, or None for a synthetic result."""
    dropped: tuple[int, ...] = ()
    """Input indices of the tool results dropped because they answer no call."""
    interrupted: tuple[tuple[int, str], ...] = ()
    """(input index of the assistant message, call id) of each call given a synthetic result."""

    @property
    def changed(self) -> bool:
        """True when anything was dropped or added."""
        return bool(self.dropped or self.interrupted)


def sanitize_orphans(messages: Sequence[Message]) -> tuple[list[Message], OrphanReport]:
    """Make every tool call and result pair up, as provider APIs require.

    A tool result is kept only when it answers an open call of the assistant message
    that opens its run of tool results (the loader's rule); any other (an orphan, or a
    second result for one call) is dropped. A call left with no result gets a synthetic
    error result, `INTERRUPTED_RESULT`, right after its group. Unlike the passes, this
    may change the length: the report maps each output message to its input index.
    """
    result: list[Message] = []
    sources: list[int | None] = []
    dropped: list[int] = []
    interrupted: list[tuple[int, str]] = []
    open_calls: dict[str, str] = {}
    owner: int | None = None

    def close_group() -> None:
        if owner is None:
            return
        for call_id, tool_name in open_calls.items():
            result.append(
                ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name=tool_name,
                    content=[TextContent(text=INTERRUPTED_RESULT)],
                    is_error=True,
                )
            )
            sources.append(None)
            interrupted.append((owner, call_id))
        open_calls.clear()

    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id in open_calls:
                del open_calls[message.tool_call_id]
                result.append(message)
                sources.append(index)
            else:
                dropped.append(index)
            continue
        close_group()
        owner = None
        result.append(message)
        sources.append(index)
        if isinstance(message, AssistantMessage) and message.tool_calls:
            owner = index
            open_calls.update((call.id, call.name) for call in message.tool_calls)
    close_group()
    return result, OrphanReport(tuple(sources), tuple(dropped), tuple(interrupted))
