"""`compress_messages`: the summarizers and passes over a plain message list, no store needed.

The stateless path of seeds 001, 003 and 004, for a caller that holds its history in
memory (`AgentContext.session is None` in seed 004). `SummarizingCompaction` runs seed
003's pipeline with seed 001's boundaries:

1. **fits already**: a history within the budget comes back unchanged;
2. **free passes** (seed 003's microcompact, seed 001's pruning of old tool output): stale
   read results are blanked and old tool output becomes one-line stubs, before the
   protected tail; when that is enough, nothing is summarised;
3. **slice** (seed 001's `split_history`): a protected head (leading system messages and
   the first `keep_first_turns` turns), a tail protected by `keep_recent_tokens` (which
   always holds the latest user request), and the middle between them, never splitting a
   tool call from its results;
4. **summarize** the middle into ONE digest with a `Summarizer` (the offline
   `ExtractiveSummarizer` by default), within seed 002's budget rule and the room the
   budget leaves; a previous digest in the history is updated, not summarised again;
5. **rehydrate** (seed 003): the freshest file reads the middle held come back after the
   digest, while the result stays strictly smaller (and only when the latest request
   follows them: a restored file is a user message);
6. **reassemble**: head (the system prompt gets seed 001's compression note), the digest
   (a reference-only framed message, in the role that keeps user and assistant turns
   alternating), the restored files, then the tail; every call is paired with its result.

When the tail itself leaves no room, it is narrowed (down to the latest request and what
answers it); then the head is folded too; then what follows the latest request is folded
as well (the system prompt, the request verbatim, one digest, the newest units that fit);
at last bulky tool output is cut to head and tail lines. A budget that not even that fits
is a `ContextOverflowError`, as for `build_context`.

`compress_messages` honours `CompactionConfig.in_memory_strategy`: `"summarize"` (the
default) is this pipeline, `"default"` the seed's legacy three levels (`compact_messages`),
or any registered or given `CompactionStrategy` (whose `compact` may be a coroutine).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sessionstore._framing import SUMMARY_CLOSE, SUMMARY_OPEN
from sessionstore._protocols import CompactionStrategy
from sessionstore._redact import redact, redact_message
from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore.config import CompactionConfig, ContextConfig, validated_config
from sessionstore.errors import ContextOverflowError
from sessionstore.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._passes import (
    microcompact,
    prune_tool_results,
    truncate_head_tail_tokens,
)
from sessionstore.strategies._plan import Compress, sanitize_orphans, split_history
from sessionstore.strategies._rehydrate import apply_rehydrate, rehydrate_recent_reads
from sessionstore.strategies._units import unit_starts
from sessionstore.summarizers import ExtractiveSummarizer, Summarizer, Summary, SummaryRequest
from sessionstore.summarizers._prompt import summary_budget

__all__ = [
    "COMPRESSION_NOTE",
    "CompressedMessages",
    "SummarizingCompaction",
    "compress_messages",
]

COMPRESSION_NOTE = (
    "[Note: Some earlier conversation turns have been compacted into a handoff summary to "
    "preserve context space. The current session state may still reflect earlier work, so "
    "build on that summary and state rather than re-doing work.]"
)
"""Seed 001's note, appended once to the system prompt of a compressed history."""

_MARKER = "compressed"
"""The `extra["sessionstore"]` key of a digest message `compress_messages` wrote."""
_MIN_SUMMARY_TOKENS = 32
"""A digest given less room than this is not worth writing: the tail is narrowed first."""


@dataclass(frozen=True, slots=True)
class CompressedMessages:
    """What `compress_messages` returns: the new list and how it was made."""

    messages: list[Message]
    """The compressed history, oldest first (the input's own objects where unchanged)."""
    tokens_before: int
    tokens_after: int
    budget: int
    strategy: str
    """`summarize`, or the name (or class) of the `in_memory_strategy` that ran."""
    folded: int = 0
    """Messages of the input the digest stands for."""
    summary: str | None = None
    """The digest's text (None when nothing was summarised)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What was done, in words (passes, narrowed tail, cut outputs)."""

    @property
    def changed(self) -> bool:
        """True when the list is not the input as it was."""
        return self.tokens_after != self.tokens_before or self.folded > 0


class SummarizingCompaction:
    """The in-memory `CompactionStrategy` of seeds 001 and 003: one digest of the middle.

    Args:
        summarizer: Writes the digest; `ExtractiveSummarizer()` by default (offline).
        counter: Counts tokens (the seed heuristic by default).
        focus_topic: A topic the digest keeps in most detail.
        cheap_passes: Run the free passes before anything is summarised.
        rehydrate: Restore the freshest file reads the middle held.
        system_note: Append seed 001's compression note to the system prompt.
        redact_secrets: Redact credentials from what the summarizer receives (the folded
            messages, the prior digest) and from the digest it returns, as
            `SummarizingBlockCompaction` does: a digest is carried into every later
            compression, so a key it kept would be sent again and again.
    """

    name = "summarize"

    def __init__(
        self,
        summarizer: Summarizer | None = None,
        *,
        counter: TokenCounter | None = None,
        focus_topic: str | None = None,
        cheap_passes: bool = True,
        rehydrate: bool = True,
        system_note: bool = True,
        redact_secrets: bool = True,
    ) -> None:
        self.summarizer: Summarizer = (
            summarizer if summarizer is not None else ExtractiveSummarizer()
        )
        self.redact_secrets = redact_secrets
        self.counter: TokenCounter = counter if counter is not None else HeuristicTokenCounter()
        self.focus_topic = focus_topic
        self.cheap_passes = cheap_passes
        self.rehydrate = rehydrate
        self.system_note = system_note

    def __repr__(self) -> str:
        return f"SummarizingCompaction(summarizer={self.summarizer!r})"

    async def compact(self, messages: Sequence[Message], config: ContextConfig) -> list[Message]:
        """Return `messages` compressed to the budget `config` gives (the protocol's form)."""
        policy = CompactionConfig(
            keep_first_turns=min(config.keep_first, 2),
            tool_output_max_lines=config.tool_output_max_lines,
        )
        return (await self.compress(messages, config.budget, policy)).messages

    def _tokens(self, messages: Sequence[Message]) -> int:
        return sum(self.counter.count_message(message) for message in messages)

    async def compress(
        self, messages: Sequence[Message], budget: int, config: CompactionConfig
    ) -> CompressedMessages:
        """Return `messages` compressed to `budget` tokens (see the module's pipeline).

        Raises:
            ContextOverflowError: not even the latest request and what answers it fit.
        """
        before = self._tokens(messages)
        policy = config.within(budget)

        def done(result: list[Message], folded: int, summary: str | None) -> CompressedMessages:
            return CompressedMessages(
                messages=result,
                tokens_before=before,
                tokens_after=self._tokens(result),
                budget=budget,
                strategy=self.name,
                folded=folded,
                summary=summary,
                notes=tuple(notes),
            )

        notes: list[str] = []
        if before <= budget:
            return done(list(messages), 0, None)
        working = list(messages)
        if self.cheap_passes:
            working = self._passes(working, policy, notes)
            if self._tokens(working) <= budget:
                return done(working, 0, None)
        head_n = _head_messages(working, policy.keep_first_turns)
        tail_budget = policy.keep_recent_tokens
        while True:
            plan = split_history(
                working,
                protect_first_n=head_n,
                tail_token_budget=tail_budget,
                min_tail_messages=1,
                min_middle_messages=1,
                counter=self.counter,
            )
            if isinstance(plan, Compress):
                result = await self._fold(working, plan, budget, policy)
                if result is not None:
                    compressed, folded, summary = result
                    if tail_budget < policy.keep_recent_tokens:
                        notes.append(f"tail narrowed to {tail_budget:,} tokens to make room")
                    return done(compressed, folded, summary)
            if tail_budget == 0:
                break
            tail_budget //= 2
        if head_n:  # the head too goes into the digest before anything is cut
            head_n = 0
            plan = split_history(
                working,
                protect_first_n=0,
                tail_token_budget=0,
                min_tail_messages=1,
                min_middle_messages=1,
                counter=self.counter,
            )
            if isinstance(plan, Compress):
                result = await self._fold(working, plan, budget, policy)
                if result is not None:
                    notes.append("the protected head was folded too")
                    return done(*result)
        around = await self._fold_around_request(working, budget, policy)
        if around is not None:
            notes.append("turns after the latest request were folded too")
            return done(*around)
        return done(*await self._last_resort(working, budget, policy, notes))

    async def _fold_around_request(
        self, messages: list[Message], budget: int, policy: CompactionConfig
    ) -> tuple[list[Message], int, str] | None:
        """Fold what lies between the head and the newest units, the latest request kept.

        For a request followed by more work than the budget holds (one task, a long run):
        leading system messages, the latest request verbatim, one digest (the assistant's)
        of everything else but the newest units that fit, then those units.
        """
        last_user = _last_user(messages)
        if last_user is None:
            return None
        lead = _head_messages(messages, 0)
        starts = [i for i in unit_starts(messages) if i > last_user]
        head = self._noted(messages[:lead]) if lead <= last_user else []
        if not head and lead:
            return None
        request = messages[last_user]
        frame = self.counter.count_text(f"{SUMMARY_OPEN}\n\n\n\n{SUMMARY_CLOSE}") + 8
        fixed = budget - self._tokens([*head, request]) - frame
        # The widest tail that leaves the digest a fair share (a quarter of the budget, at
        # most max_summary_tokens), else the widest that leaves it any room: one summary.
        share = max(_MIN_SUMMARY_TOKENS, min(policy.max_summary_tokens, budget // 4))
        rooms = [(start, fixed - self._tokens(messages[start:])) for start in starts]
        fitting = [pair for pair in rooms if pair[1] >= share] or [
            pair for pair in rooms if pair[1] >= _MIN_SUMMARY_TOKENS
        ]
        cut_tail: list[Message] | None = None
        if not fitting and starts:
            # Not even the newest unit leaves room: its bulky tool output is cut first.
            start = starts[-1]
            outputs = [m for m in messages[start:] if isinstance(m, ToolResultMessage)]
            rest = self._tokens([m for m in messages[start:] if m not in outputs])
            framing = sum(  # what an output costs beside its text
                max(0, self.counter.count_message(m) - self.counter.count_text(m.text))
                for m in outputs
            )
            allowance = (fixed - _MIN_SUMMARY_TOKENS - rest - framing) // max(1, len(outputs))
            if outputs and allowance > 0:
                cut_tail = [
                    _cut_output(m, allowance, self.counter)
                    if isinstance(m, ToolResultMessage)
                    else m
                    for m in messages[start:]
                ]
                room = fixed - self._tokens(cut_tail)
                if room >= _MIN_SUMMARY_TOKENS:
                    fitting = [(start, room)]
        for start, room in fitting[:1]:
            tail = cut_tail if cut_tail is not None else messages[start:]
            folded = messages[lead:last_user] + messages[last_user + 1 : start]
            if not folded:
                return None
            prior, folded = _prior_digest(folded)
            folded_tokens = self._tokens(folded)
            wanted = summary_budget(folded_tokens, max_tokens=policy.max_summary_tokens)
            summary, text = await self._summarize(folded, prior, min(room, wanted))
            if self.counter.count_text(text) > room:
                text = truncate_head_tail_tokens(text, room, counter=self.counter)
            if not text:
                return None
            digest = _digest_message(text, "assistant", summary.model, folded_tokens)
            result, _ = sanitize_orphans([*head, request, digest, *tail])
            if self._tokens(result) <= budget:
                return result, len(folded), text
        return None

    def _passes(
        self, messages: list[Message], policy: CompactionConfig, notes: list[str]
    ) -> list[Message]:
        micro = microcompact(messages, counter=self.counter)
        pruned = prune_tool_results(
            micro.messages,
            protect_tail_tokens=policy.keep_recent_tokens,
            counter=self.counter,
        )
        if micro.cleared:
            notes.append(f"{micro.cleared} stale read result(s) cleared")
        if pruned.stubbed or pruned.deduped:
            notes.append(f"{pruned.stubbed + pruned.deduped} old tool output(s) shortened")
        result = pruned.messages  # as many as went in, in the same order
        # The latest request goes through verbatim (its images too).
        last_user = _last_user(messages)
        if last_user is not None:
            result[last_user] = messages[last_user]
        return result

    async def _summarize(
        self, messages: list[Message], prior: str | None, budget: int
    ) -> tuple[Summary, str]:
        """Ask the summarizer for the digest; return its answer and its text, stripped.

        With `redact_secrets`, what it is sent and the text it returns are redacted.
        """
        if self.redact_secrets:
            messages = [redact_message(message) for message in messages]
            prior = redact(prior) if prior else prior
        summary = await self.summarizer.summarize(
            SummaryRequest(
                messages=messages,
                prior_digest=prior,
                focus_topic=self.focus_topic,
                budget_tokens=budget,
            )
        )
        text = summary.text.strip()
        return summary, redact(text) if self.redact_secrets else text

    async def _fold(
        self, messages: list[Message], plan: Compress, budget: int, policy: CompactionConfig
    ) -> tuple[list[Message], int, str] | None:
        """Summarise the plan's middle into the room left; None when it cannot fit."""
        head, middle, tail = plan.split(messages)
        prior, middle = _prior_digest(middle)
        head = self._noted(head)
        frame = self.counter.count_text(f"{SUMMARY_OPEN}\n\n\n\n{SUMMARY_CLOSE}") + 8
        room = budget - self._tokens(head) - self._tokens(tail) - frame
        if room < _MIN_SUMMARY_TOKENS:
            return None
        if not middle and prior is None:
            return None
        folded_tokens = self._tokens(middle)
        summary, text = await self._summarize(
            middle,
            prior,
            min(room, summary_budget(folded_tokens, max_tokens=policy.max_summary_tokens)),
        )
        if self.counter.count_text(text) > room:
            text = truncate_head_tail_tokens(text, room, counter=self.counter)
        if not text:
            return None
        digest = _digest_message(text, _role_between(head, tail), summary.model, folded_tokens)
        result = [*head, digest, *tail]
        # Restored files are user messages: only before the latest request, never after it.
        if self.rehydrate and middle and any(isinstance(m, UserMessage) for m in tail):
            restored = rehydrate_recent_reads(
                middle,
                [*head, *tail],
                token_budget=min(8_000, policy.max_summary_tokens),
                counter=self.counter,
            )
            spare = budget - self._tokens(result)
            kept = apply_rehydrate(self._tokens([digest]), folded_tokens, restored)
            chosen = []
            for item in kept:
                if item.tokens > spare:
                    break
                chosen.append(item.message)
                spare -= item.tokens
            result = [*head, digest, *chosen, *tail]
        result, _ = sanitize_orphans(result)
        if self._tokens(result) > budget:
            return None
        return result, len(plan.middle), text

    def _noted(self, head: list[Message]) -> list[Message]:
        """Return the head with seed 001's note on its system prompt (once)."""
        if not self.system_note or not head or not isinstance(head[0], SystemMessage):
            return head
        system = head[0]
        if COMPRESSION_NOTE in system.text:
            return head
        noted = system.model_copy(
            update={"content": [*system.content, TextContent(text=COMPRESSION_NOTE)]}
        )
        return [noted, *head[1:]]

    async def _last_resort(
        self, messages: list[Message], budget: int, policy: CompactionConfig, notes: list[str]
    ) -> tuple[list[Message], int, str | None]:
        """Keep the latest request and what follows it, bulky output cut; else overflow."""
        starts = unit_starts(messages)
        last_user = _last_user(messages)
        cut = last_user if last_user is not None else starts[-1]
        tail = messages[cut:]
        per_output = max(1, budget // max(1, len(tail)))
        shortened = [
            _cut_output(m, per_output, self.counter) if isinstance(m, ToolResultMessage) else m
            for m in tail
        ]
        fitted, _ = sanitize_orphans(shortened)
        tokens = self._tokens(fitted)
        if tokens > budget:
            raise ContextOverflowError(
                f"not even the latest request and what answers it ({tokens:,} tokens) fit "
                f"the budget of {budget:,} tokens",
                needed=tokens,
                available=budget,
            )
        notes.append(f"{cut} earlier message(s) left out; tool output cut to fit")
        return fitted, cut, None


def _last_user(messages: Sequence[Message]) -> int | None:
    return max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=None)


def _head_messages(messages: Sequence[Message], turns: int) -> int:
    """Return how many messages the head holds: leading system messages and `turns` units."""
    lead = 0
    while lead < len(messages) and isinstance(messages[lead], SystemMessage):
        lead += 1
    starts = [s for s in unit_starts(messages) if s >= lead]
    return starts[turns] if turns < len(starts) else len(messages)


def _prior_digest(middle: list[Message]) -> tuple[str | None, list[Message]]:
    """Return the text of a digest an earlier compression wrote, and the middle without it."""
    for index, message in enumerate(middle):
        marker = message.extra.get("sessionstore")
        if isinstance(marker, dict) and _MARKER in marker:
            text = message.text if isinstance(message, UserMessage | AssistantMessage) else ""
            inner = text.removeprefix(SUMMARY_OPEN).removesuffix(SUMMARY_CLOSE).strip()
            return inner, middle[:index] + middle[index + 1 :]
    return None, middle


def _role_of(message: Message) -> str:
    if isinstance(message, AssistantMessage | ToolResultMessage):
        return "assistant"
    return "user"


def _role_between(head: Sequence[Message], tail: Sequence[Message]) -> str:
    """Seed 001's choice: avoid the head's last role first, then the tail's first if free.

    With no user message after it, the digest is the assistant's: a user-role digest
    would stand where the latest request should be (its frame says to answer the request
    after it, and there is none).
    """
    if not any(isinstance(message, UserMessage) for message in tail):
        return "assistant"
    last = _role_of(head[-1]) if head else "user"
    first = _role_of(tail[0]) if tail else "user"
    role = "user" if last == "assistant" else "assistant"
    flipped = "assistant" if role == "user" else "user"
    if role == first and flipped != last:
        role = flipped
    return role


def _digest_message(text: str, role: str, model: str, folded_tokens: int) -> Message:
    body = f"{SUMMARY_OPEN}\n\n{text}\n\n{SUMMARY_CLOSE}"
    extra: dict[str, Any] = {
        "sessionstore": {_MARKER: {"model": model, "tokens_before": folded_tokens}}
    }
    if role == "assistant":
        return AssistantMessage(content=[TextContent(text=body)], extra=extra)
    return UserMessage(content=[TextContent(text=body)], extra=extra)


def _cut_output(message: ToolResultMessage, max_tokens: int, counter: TokenCounter) -> Message:
    blocks = [
        TextContent(text=truncate_head_tail_tokens(block.text, max_tokens, counter=counter))
        if isinstance(block, TextContent)
        else block
        for block in message.content
    ]
    return message.model_copy(update={"content": blocks})


async def compress_messages(
    messages: Sequence[Message],
    budget: int,
    *,
    summarizer: Summarizer | None = None,
    config: CompactionConfig | dict[str, Any] | None = None,
    focus_topic: str | None = None,
    counter: TokenCounter | None = None,
) -> CompressedMessages:
    """Compress a plain message list to `budget` tokens with the summarizers and passes.

    The stateless path (seeds 001, 003, 004): nothing is stored or read. A list that fits
    comes back unchanged; otherwise the middle is folded into one digest between a
    protected head and tail (see `SummarizingCompaction`). The result fits the budget,
    pairs every tool call with its result, and holds the latest user request verbatim.

    >>> import asyncio
    >>> from sessionstore.models import UserMessage
    >>> asyncio.run(compress_messages([UserMessage(content="hi")], 100)).messages[0].text
    'hi'

    Args:
        messages: The history, oldest first; not changed.
        budget: The tokens the messages may use (the window less the system prompt
            when the caller sends it apart).
        summarizer: Writes the digest; `ExtractiveSummarizer()` (offline) by default.
        config: `keep_first_turns`, `keep_recent_tokens`, `max_summary_tokens`,
            `tool_output_max_lines`, and `in_memory_strategy`: `"summarize"` (the
            default) is this pipeline; another name or object runs that strategy.
        focus_topic: A topic the digest keeps in most detail.
        counter: Counts tokens (the seed heuristic by default).

    Raises:
        ValueError: a budget that is not a positive int.
        ConfigurationError: a bad config or an unknown strategy name.
        ContextOverflowError: not even the latest request and what answers it fit.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:  # type: ignore[redundant-expr]  # callers without a type checker
        raise ValueError(f"budget must be a positive int, got {budget!r}")
    policy = validated_config(config, CompactionConfig)
    choice = policy.in_memory_strategy
    if choice == SummarizingCompaction.name or isinstance(choice, SummarizingCompaction):
        strategy = (
            choice
            if isinstance(choice, SummarizingCompaction)
            else SummarizingCompaction(summarizer, counter=counter, focus_topic=focus_topic)
        )
        return await strategy.compress(messages, budget, policy)
    from sessionstore.strategies import get_compaction_strategy  # the registry imports this module

    other: CompactionStrategy = get_compaction_strategy(choice)
    legacy = ContextConfig(
        max_context_tokens=budget,
        system_prompt_tokens=0,
        tool_output_max_lines=policy.tool_output_max_lines,
    )
    outcome: Any = other.compact(messages, legacy)
    result: list[Message] = list(await outcome if inspect.isawaitable(outcome) else outcome)
    count = counter if counter is not None else HeuristicTokenCounter()
    return CompressedMessages(
        messages=result,
        tokens_before=sum(count.count_message(m) for m in messages),
        tokens_after=sum(count.count_message(m) for m in result),
        budget=budget,
        strategy=choice if isinstance(choice, str) else type(choice).__name__,
    )
