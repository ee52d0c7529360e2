"""Trajectory compression for training data: fold just enough of a trajectory's middle (pure).

Seed 001's `TrajectoryCompressor` (Hermes Agent): a finished agent trajectory that is over
a training context window keeps its head (the system prompt, the first request and the
first answer) and its last turns verbatim; the oldest turns of the middle, and only as
many as needed, are replaced by ONE summary turn in the `human` role, so that the
trajectory fits `target_max_tokens`.

A record is one JSON object: ShareGPT (`{"conversations": [{"from": ..., "value": ...}]}`)
or OpenAI (`{"messages": [{"role": ..., ...}]}`). The form is detected, every other key of
the record is kept, and the output is written in the input's form. Untouched turns are
the input's own objects, so they round-trip exactly.

Where sessionstore differs from the seed:

- the fold is the *smallest* run of whole units (an assistant turn and the tool results
  that answer it are never split) whose replacement fits, found by prefix sums and a
  binary search over the summary budget rule (`summary_budget`: 20% of the folded
  tokens, floored at 200), instead of a greedy accumulation against a fixed reserve;
- when even folding the whole middle does not fit with that budget, the summary is given
  exactly the room that is left (best effort); `still_over_target` says when no fold fits;
- the system prompt is not edited (the seed appends a notice to it); the summary turn
  carries its own `[CONTEXT SUMMARY ...]` frame;
- a summary longer than its budget (a model can overrun) makes the fold grow and the
  summary be asked again, a bounded number of times.

>>> import asyncio
>>> record = {"id": 7, "conversations": [{"from": "human", "value": "hi"}]}
>>> result = asyncio.run(compress_trajectory(record, target_max_tokens=100))
>>> result.record == record, result.metrics.compressed
(True, False)
"""

from __future__ import annotations

import asyncio
import bisect
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore.errors import FormatError, TrajectoryLineError
from sessionstore.formats import from_openai
from sessionstore.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._plan import prefix_tokens
from sessionstore.strategies._units import unit_starts
from sessionstore.summarizers import ExtractiveSummarizer, Summarizer, SummaryRequest
from sessionstore.summarizers import summary_budget as _summary_budget

__all__ = [
    "DEFAULT_PROTECT_LAST",
    "DEFAULT_TARGET_MAX_TOKENS",
    "SUMMARY_PREFIX",
    "TrajectoryFormat",
    "TrajectoryMetrics",
    "TrajectoryReport",
    "TrajectoryResult",
    "compress_trajectory",
    "compress_trajectory_lines",
    "record_line",
    "sharegpt_to_messages",
]

DEFAULT_TARGET_MAX_TOKENS = 15_250
"""Seed 001's `target_max_tokens`."""
DEFAULT_PROTECT_LAST = 4
"""Seed 001's `protect_last_n_turns`: the last turns kept verbatim."""
DEFAULT_MAX_SUMMARY_TOKENS = 2_000
"""The most a summary turn may take, under the 20%-of-folded rule."""
SUMMARY_PREFIX = "[CONTEXT SUMMARY: earlier turns of this trajectory, folded; reference only]"
"""The first line of the summary turn."""
_SUMMARY_END = "[END OF CONTEXT SUMMARY]"
_MAX_ATTEMPTS = 3

TrajectoryFormat = Literal["sharegpt", "openai"]

_SYSTEM = frozenset({"system"})
_HUMAN = frozenset({"human", "user"})
_GPT = frozenset({"gpt", "assistant", "chatgpt", "model", "bard", "bing"})
_CALL = frozenset({"function_call"})
_RESULT = frozenset({"tool", "observation", "function_response", "function", "ipython"})
_KNOWN_FROM = _SYSTEM | _HUMAN | _GPT | _CALL | _RESULT
_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


@dataclass(frozen=True, slots=True)
class TrajectoryMetrics:
    """What compressing one trajectory did."""

    tokens_before: int
    tokens_after: int
    turns_before: int
    turns_after: int
    turns_folded: int = 0
    """Input turns replaced by the summary turn (0 when nothing was folded)."""
    folded: tuple[int, int] | None = None
    """The input turns folded, as a half-open `(start, stop)`, or None."""
    still_over_target: bool = False
    """True when even the largest allowed fold does not bring it under the target."""
    summarizer_ms: float = 0.0
    """Time spent in the summarizer, all attempts."""
    summary_model: str | None = None
    note: str = ""
    """Why a trajectory was left unchanged, or what the best effort was."""

    @property
    def compressed(self) -> bool:
        """True when a summary turn replaced part of the trajectory."""
        return self.folded is not None

    def to_dict(self) -> dict[str, Any]:
        """Return the metrics as plain JSON values."""
        data = asdict(self)
        data["folded"] = list(self.folded) if self.folded is not None else None
        data["compressed"] = self.compressed
        return data


@dataclass(frozen=True, slots=True)
class TrajectoryResult:
    """One compressed trajectory: the output record, its form and its metrics."""

    record: dict[str, Any]
    """The record in the input's form: the input itself when nothing was folded."""
    format: TrajectoryFormat
    metrics: TrajectoryMetrics


@dataclass(slots=True)
class TrajectoryReport:
    """Totals over many trajectories (`add` each result's metrics)."""

    trajectories: int = 0
    compressed: int = 0
    unchanged: int = 0
    still_over_target: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    turns_folded: int = 0
    summarizer_ms: float = 0.0
    seconds: float = 0.0
    """Wall time, set by whoever ran the batch."""
    over_target_lines: list[int] = field(default_factory=list)
    """Line numbers (from 1) of the trajectories still over the target."""

    def add(self, metrics: TrajectoryMetrics, line_number: int | None = None) -> None:
        """Count one trajectory."""
        self.trajectories += 1
        if metrics.compressed:
            self.compressed += 1
        else:
            self.unchanged += 1
        if metrics.still_over_target:
            self.still_over_target += 1
            if line_number is not None:
                self.over_target_lines.append(line_number)
        self.tokens_before += metrics.tokens_before
        self.tokens_after += metrics.tokens_after
        self.turns_folded += metrics.turns_folded
        self.summarizer_ms += metrics.summarizer_ms

    def to_dict(self) -> dict[str, Any]:
        """Return the totals as plain JSON values."""
        return asdict(self)


# ── formats ────────────────────────────────────────────────────────────────────


def _detect(record: Mapping[str, Any]) -> tuple[TrajectoryFormat, list[Any]]:
    if not isinstance(record, Mapping):
        raise FormatError(f"a trajectory must be a JSON object, not {type(record).__name__}")
    has_sharegpt, has_openai = "conversations" in record, "messages" in record
    if has_sharegpt and has_openai:
        raise FormatError("the record has both 'conversations' and 'messages'; which is it?")
    if not (has_sharegpt or has_openai):
        raise FormatError(
            "the record has neither 'conversations' (ShareGPT) nor 'messages' (OpenAI)"
        )
    key = "conversations" if has_sharegpt else "messages"
    turns = record[key]
    if not isinstance(turns, list):
        raise FormatError(f"'{key}' must be a list, not {type(turns).__name__}")
    return ("sharegpt" if has_sharegpt else "openai"), turns


def _parse_calls(text: str, index: int) -> list[ToolCall]:
    """Read Hermes-style `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks."""
    calls: list[ToolCall] = []
    for number, match in enumerate(_TOOL_CALL_TAG.finditer(text)):
        calls.extend(_call_from_json(match[1], f"sharegpt-{index}-{number}"))
    return calls


def _call_from_json(text: str, call_id: str) -> list[ToolCall]:
    # Text that is not a call (not JSON, or nested too deeply to read) stays text.
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return []
        arguments = data.get("arguments", data.get("parameters", {}))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
    except (ValueError, RecursionError):
        return []
    if not data["name"]:
        return []
    return [ToolCall(id=call_id, name=data["name"], arguments=arguments)]


def sharegpt_to_messages(turns: Sequence[Any]) -> list[Message]:
    """Read ShareGPT turns as our messages, one per turn (for counting and summarising).

    `system` is a system message; `human`/`user` a user message; `gpt`/`assistant` an
    assistant message, whose Hermes `<tool_call>` blocks become tool calls;
    `function_call` an assistant tool call; `tool`/`observation`/`function_response` a
    tool result that answers the open calls of the assistant turn before it, in order.

    Raises:
        FormatError: a turn is not an object with a known `from` and a string `value`;
            the message names the turn.
    """
    messages: list[Message] = []
    pending: list[ToolCall] = []
    for index, turn in enumerate(turns):
        if not isinstance(turn, Mapping):
            raise FormatError(f"turn {index}: expected an object, got {type(turn).__name__}")
        role, value = turn.get("from"), turn.get("value")
        if not isinstance(role, str) or role not in _KNOWN_FROM:
            known = ", ".join(sorted(_KNOWN_FROM))
            raise FormatError(f"turn {index}: 'from' is {role!r}, expected one of {known}")
        if not isinstance(value, str):
            raise FormatError(f"turn {index}: 'value' must be a string, not {type(value).__name__}")
        message: Message
        if role in _SYSTEM:
            message, pending = SystemMessage(content=[TextContent(text=value)]), []
        elif role in _HUMAN:
            message, pending = UserMessage(content=[TextContent(text=value)]), []
        elif role in _GPT or role in _CALL:
            calls = (
                _parse_calls(value, index)
                if role in _GPT
                else _call_from_json(value, f"sharegpt-{index}-0")
            )
            text = [] if role in _CALL and calls else [TextContent(text=value)]
            message = AssistantMessage(content=[*text, *calls])
            pending = list(calls)
        else:
            call = pending.pop(0) if pending else None
            message = ToolResultMessage(
                tool_call_id=call.id if call else f"sharegpt-{index}-result",
                tool_name=call.name if call else role,
                content=[TextContent(text=value)],
            )
        messages.append(message)
    return messages


def _summary_turn(form: TrajectoryFormat, text: str) -> dict[str, Any]:
    if form == "sharegpt":
        return {"from": "human", "value": text}
    return {"role": "user", "content": text}


def _summary_text(body: str) -> str:
    body = body.strip()
    return f"{SUMMARY_PREFIX}\n{body}\n{_SUMMARY_END}" if body else SUMMARY_PREFIX


# ── planning ───────────────────────────────────────────────────────────────────


def _head_end(messages: Sequence[Message], starts: Sequence[int], protect_first: int | None) -> int:
    """End of the protected head, at a unit boundary.

    None: leading system messages, the first user message and the first assistant
    message after it (seed 001's head); an int: that many first turns.
    """
    length = len(messages)
    if protect_first is None:
        end = 0
        while end < length and isinstance(messages[end], SystemMessage):
            end += 1
        for kind in (UserMessage, AssistantMessage):
            found = next((i for i in range(end, length) if isinstance(messages[i], kind)), None)
            if found is not None:
                end = found + 1
    else:
        end = min(protect_first, length)
    bounds = [*starts, length]
    return bounds[bisect.bisect_left(bounds, end)]


def _tail_start(starts: Sequence[int], length: int, protect_last: int) -> int:
    """Start of the protected tail: the last `protect_last` turns, widened to a unit start."""
    first = max(length - protect_last, 0)
    index = bisect.bisect_right(starts, first) - 1
    return starts[index] if index >= 0 else 0


@dataclass(frozen=True, slots=True)
class _Fold:
    stop: int
    budget: int
    fits: bool


def _plan(
    prefix: Sequence[int],
    stops: Sequence[int],
    head_end: int,
    target: int,
    overhead: int,
    max_summary_tokens: int,
    reserve: Callable[[int], int] | None = None,
) -> _Fold:
    """Return the smallest fold `[head_end, stop)` whose summary makes the total fit.

    Net saving grows with the fold (the summary budget grows by 20% of it at most), so
    the first fitting stop is found by a binary search over `stops` (ascending).
    """
    total = prefix[-1]

    def budget(stop: int) -> int:
        folded = prefix[stop] - prefix[head_end]
        if reserve is not None:
            return reserve(folded)
        return _summary_budget(folded, max_tokens=max_summary_tokens)

    def after(stop: int) -> int:
        return total - (prefix[stop] - prefix[head_end]) + overhead + budget(stop)

    index = bisect.bisect_left(stops, True, key=lambda stop: after(stop) <= target)
    if index < len(stops):
        stop = stops[index]
        return _Fold(stop, budget(stop), True)
    # Best effort: fold all of the middle, and give the summary whatever room is left.
    stop = stops[-1]
    room = target - (total - (prefix[stop] - prefix[head_end])) - overhead
    if room >= 1:
        return _Fold(stop, min(room, budget(stop)), True)
    return _Fold(stop, budget(stop), False)


# ── one trajectory ─────────────────────────────────────────────────────────────


async def compress_trajectory(
    record: Mapping[str, Any],
    *,
    target_max_tokens: int = DEFAULT_TARGET_MAX_TOKENS,
    summarizer: Summarizer | None = None,
    protect_first: int | None = None,
    protect_last: int = DEFAULT_PROTECT_LAST,
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    counter: TokenCounter | None = None,
) -> TrajectoryResult:
    """Fold just enough of a trajectory's middle into one summary turn to fit a target.

    Args:
        record: One trajectory: ShareGPT `{"conversations": [...]}` or OpenAI
            `{"messages": [...]}`, with any other keys (kept unchanged).
        target_max_tokens: The most tokens the trajectory may take (seed 001: 15,250).
        summarizer: Writes the summary (`ExtractiveSummarizer()` by default).
        protect_first: Turns kept at the start; None (the default) keeps the system
            prompt, the first request and the first answer (with its tool results).
        protect_last: Turns kept at the end (widened so no tool call loses its result).
        max_summary_tokens: The most the summary may take.
        counter: Counts tokens (the seed heuristic by default).

    Returns:
        The output record in the input's form, its form, and the metrics. A trajectory
        already within the target, or with nothing between its head and tail, is
        returned unchanged (the same object).

    Raises:
        FormatError: the record is not a trajectory, or a turn is malformed.
        TypeError: an argument has the wrong type.
        ValueError: a count or budget is out of range.
    """
    for name, value in (
        ("target_max_tokens", target_max_tokens),
        ("protect_last", protect_last),
        ("max_summary_tokens", max_summary_tokens),
        *((("protect_first", protect_first),) if protect_first is not None else ()),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < (1 if name in ("target_max_tokens", "max_summary_tokens") else 0):
            raise ValueError(f"{name} is out of range: {value}")
    summarizer = ExtractiveSummarizer() if summarizer is None else summarizer
    counter = HeuristicTokenCounter() if counter is None else counter
    form, turns = _detect(record)
    messages = sharegpt_to_messages(turns) if form == "sharegpt" else from_openai(turns)
    counts = [counter.count_message(message) for message in messages]
    prefix = prefix_tokens(counts)
    total, length = prefix[-1], len(messages)

    def unchanged(note: str, *, over: bool) -> TrajectoryResult:
        metrics = TrajectoryMetrics(total, total, length, length, still_over_target=over, note=note)
        return TrajectoryResult(dict(record), form, metrics)

    if total <= target_max_tokens:
        return unchanged(f"{total} tokens are within the target", over=False)
    starts = unit_starts(messages)
    head_end = _head_end(messages, starts, protect_first)
    tail_start = _tail_start(starts, length, protect_last)
    stops = [s for s in [*starts, length] if head_end < s <= tail_start]
    if not stops:
        return unchanged("nothing lies between the protected head and tail", over=True)

    overhead = counter.count_message(UserMessage(content=[TextContent(text=_summary_text("x"))]))
    reserve: Callable[[int], int] | None = None
    elapsed, model = 0.0, None
    for _attempt in range(_MAX_ATTEMPTS):
        fold = _plan(
            prefix, stops, head_end, target_max_tokens, overhead, max_summary_tokens, reserve
        )
        request = SummaryRequest(messages=messages[head_end : fold.stop], budget_tokens=fold.budget)
        clock = time.perf_counter()
        summary = await summarizer.summarize(request)
        elapsed += (time.perf_counter() - clock) * 1000
        model = summary.model
        text = _summary_text(summary.text)
        summary_tokens = counter.count_message(UserMessage(content=[TextContent(text=text)]))
        after = total - (prefix[fold.stop] - prefix[head_end]) + summary_tokens
        if after <= target_max_tokens or fold.stop == stops[-1]:
            break
        # The summary overran its budget: reserve what it took, and fold more.
        took = summary_tokens - overhead

        def reserve(folded: int, took: int = took) -> int:
            return max(took, 1)

    output = [*turns[:head_end], _summary_turn(form, text), *turns[fold.stop :]]
    key = "conversations" if form == "sharegpt" else "messages"
    out_record = {k: (output if k == key else v) for k, v in record.items()}
    over = after > target_max_tokens
    metrics = TrajectoryMetrics(
        tokens_before=total,
        tokens_after=after,
        turns_before=length,
        turns_after=len(output),
        turns_folded=fold.stop - head_end,
        folded=(head_end, fold.stop),
        still_over_target=over,
        summarizer_ms=elapsed,
        summary_model=model,
        note=(
            f"the protected head and tail alone leave no room under {target_max_tokens} tokens"
            if over
            else ""
        ),
    )
    return TrajectoryResult(out_record, form, metrics)


# ── many trajectories ──────────────────────────────────────────────────────────


_TOO_DEEP = "nested too deeply to read (a trajectory nests a few levels, not thousands)"


def _parse_line(number: int, line: str | bytes) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise TrajectoryLineError(number, f"not valid JSON ({exc})") from exc
    except RecursionError:
        raise TrajectoryLineError(number, f"not valid JSON: {_TOO_DEEP}") from None
    if not isinstance(record, dict):
        raise TrajectoryLineError(number, f"expected a JSON object, got {type(record).__name__}")
    return record


def record_line(number: int, record: Mapping[str, Any]) -> str:
    r"""Return a record as one JSONL line (without the newline), as exact as the input.

    Non-ASCII characters are written as they are; a record holding a lone surrogate (which
    its line could only hold escaped, `\ud800`) is written with every non-ASCII character
    escaped, so it reads back the same.

    Raises:
        TrajectoryLineError: the record is nested too deeply to write.
    """
    try:
        text = json.dumps(record, ensure_ascii=False)
        if _has_surrogate(text):
            text = json.dumps(record)
    except RecursionError:
        raise TrajectoryLineError(number, _TOO_DEEP) from None
    return text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


async def compress_trajectory_lines(
    lines: Iterable[str | bytes],
    compress: Callable[[dict[str, Any]], Awaitable[TrajectoryResult]],
    *,
    workers: int = 1,
) -> AsyncIterator[tuple[int, TrajectoryResult]]:
    """Compress JSONL lines with up to `workers` at a time; yield results in input order.

    Lines are read lazily and at most `2 * workers` are in flight, so memory stays
    bounded however long the input is. Blank lines are skipped.

    Args:
        lines: The JSONL lines, one trajectory each.
        compress: Compresses one record (`compress_trajectory` with its options bound,
            or a call into a process pool).
        workers: How many trajectories are compressed at once.

    Yields:
        (line number from 1, result), in the order of the lines.

    Raises:
        TrajectoryLineError: a line is not JSON, not a trajectory, or holds a malformed
            turn; the results of the lines before it have been yielded.
    """
    if workers < 1:
        raise ValueError(f"workers must be an int of at least 1, got {workers!r}")

    async def one(number: int, line: str | bytes) -> TrajectoryResult:
        record = _parse_line(number, line)
        try:
            return await compress(record)
        except (FormatError, ValueError, TypeError) as exc:
            if isinstance(exc, TrajectoryLineError):
                raise
            raise TrajectoryLineError(number, str(exc)) from exc
        except RecursionError:
            # A value a little less deep than the parser's limit parses, then is too deep
            # for the code that walks it.
            raise TrajectoryLineError(number, _TOO_DEEP) from None

    window: list[tuple[int, asyncio.Task[TrajectoryResult]]] = []
    try:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            window.append((number, asyncio.ensure_future(one(number, line))))
            if len(window) >= 2 * workers:
                first, task = window.pop(0)
                yield first, await task
            # Keep at most `workers` running: wait while more are unfinished.
            while sum(not task.done() for _, task in window) >= workers:
                await asyncio.wait(
                    [t for _, t in window if not t.done()], return_when=asyncio.FIRST_COMPLETED
                )
        while window:
            first, task = window.pop(0)
            yield first, await task
    finally:
        for _, task in window:
            task.cancel()
