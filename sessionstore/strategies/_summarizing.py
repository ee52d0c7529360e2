"""`SummarizingBlockCompaction`: one holistic digest of the folded turns, with provenance.

The most recent loop is split as seed 001 splits a history (`split_history`): a protected
head (`keep_first`), a middle folded into one digest (`keep_compacted`), and a tail
protected by a token budget (`keep_recent`, tool output truncated). The digest comes from
a `Summarizer` (the offline `ExtractiveSummarizer` by default) within seed 002's budget
rule (`summary_budget`); on a re-compaction the loop's previous digest is carried forward
and only the turns it did not fold yet are given to the summarizer. After the digest come
the freshest file reads folded away (`rehydrate_recent_reads`), under the strict-shrink
guard. An older loop gets one digest of its whole self.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore._redact import redact, redact_message
from sessionstore._tokens import HeuristicTokenCounter, TokenCounter
from sessionstore.config import CompactionConfig
from sessionstore.models import (
    CompactedSection,
    CompactionBlock,
    CompactionSummaryMessage,
    Message,
    ReplacementMessage,
    StoredMessage,
    TurnRange,
)
from sessionstore.strategies._block import LoopView
from sessionstore.strategies._default import truncated_copy
from sessionstore.strategies._passes import microcompact, prune_tool_results
from sessionstore.strategies._plan import Compress, split_history
from sessionstore.strategies._rehydrate import apply_rehydrate, rehydrate_recent_reads
from sessionstore.summarizers import ExtractiveSummarizer, Summarizer, SummaryRequest
from sessionstore.summarizers._prompt import summary_budget
from sessionstore.summarizers._protocol import digest_text

__all__ = ["DIGEST_MARKER", "SummarizingBlockCompaction", "digest_of"]

DIGEST_MARKER = "digest"
"""The `extra["sessionstore"]` key a digest message carries: its summarizer's provenance."""


def digest_of(block: CompactionBlock | None) -> str | None:
    """Return the digest text a block's `keep_compacted` holds, if it holds one."""
    if block is None or block.keep_compacted is None:
        return None
    for replacement in block.keep_compacted.messages:
        message = replacement.message
        marker = message.extra.get("sessionstore")
        if isinstance(message, CompactionSummaryMessage) and (
            isinstance(marker, dict) and DIGEST_MARKER in marker
        ):
            return message.summary
    return None


class SummarizingBlockCompaction:
    """A `BlockCompactionStrategy` whose `keep_compacted` is one digest of every folded turn.

    Args:
        summarizer: Writes the digest; `ExtractiveSummarizer()` by default (offline).
        counter: Counts the tokens of what the block shows.
        cheap_passes: Run `microcompact` and `prune_tool_results` on the folded messages
            before the summarizer sees them (worth it before a model call; an extractive
            summarizer reads the raw messages better).
        rehydrate: Restore the freshest file reads folded away (seed 003).
        focus_topic: A topic the digest keeps in most detail.
        redact_secrets: Redact credentials from what the summarizer receives and returns.
    """

    name = "summarize"

    def __init__(
        self,
        summarizer: Summarizer | None = None,
        *,
        counter: TokenCounter | None = None,
        cheap_passes: bool = False,
        rehydrate: bool = True,
        focus_topic: str | None = None,
        redact_secrets: bool = True,
    ) -> None:
        self.summarizer: Summarizer = (
            summarizer if summarizer is not None else ExtractiveSummarizer()
        )
        self.counter: TokenCounter = counter if counter is not None else HeuristicTokenCounter()
        self.cheap_passes = cheap_passes
        self.rehydrate = rehydrate
        self.focus_topic = focus_topic
        self.redact_secrets = redact_secrets

    def __repr__(self) -> str:
        return f"SummarizingBlockCompaction(summarizer={self.summarizer!r})"

    @property
    def digest_summarizer(self) -> Summarizer:
        """The summarizer a compaction with this strategy writes the session digest with."""
        return self.summarizer

    async def compact(
        self, view: LoopView, config: CompactionConfig, is_most_recent: bool
    ) -> CompactionBlock:
        """Return the loop's block: head, one digest and the tail, or one digest of it all."""
        messages = view.messages
        tokens_before = sum(m.token_count for m in messages)
        turn_count = view.turn_map.turn_count()
        if turn_count == 0:
            return self._block(config, tokens_before, None, None, None)
        if not is_most_recent:
            everything = TurnRange(start_turn=0, end_turn=turn_count - 1)
            section = await self._digest(view, everything, messages, [], config)
            return self._block(config, tokens_before, None, section, None)
        head_turns, middle_turns, tail_turns = self._boundaries(view, config)
        if middle_turns is None:
            # Nothing worth folding: keep it all; the caller leaves such a loop raw.
            whole = TurnRange(start_turn=0, end_turn=turn_count - 1)
            return self._block(config, tokens_before, whole, None, None, first=tokens_before)
        start, end = view.turn_map.msg_range(middle_turns)
        kept = [m.message for m in messages[:start]] + [m.message for m in messages[end:]]
        section = await self._digest(view, middle_turns, messages[start:end], kept, config)
        recent = None
        if tail_turns is not None:
            first, last = view.turn_map.msg_range(tail_turns)
            max_lines = config.tool_output_max_lines
            recent = CompactedSection(
                range=tail_turns,
                messages=[truncated_copy(m, max_lines, self.counter) for m in messages[first:last]],
            )
        first = sum(m.token_count for m in view.turn_messages(head_turns)) if head_turns else 0
        return self._block(config, tokens_before, head_turns, section, recent, first=first)

    def _boundaries(
        self, view: LoopView, config: CompactionConfig
    ) -> tuple[TurnRange | None, TurnRange | None, TurnRange | None]:
        """Return the head, middle and tail turns (None: empty), snapped to whole turns."""
        messages = view.messages
        turn_map = view.turn_map
        turn_count = turn_map.turn_count()
        first_turns = min(config.keep_first_turns, turn_count)
        protect = turn_map.ranges[first_turns - 1][1] if first_turns else 0
        plan = split_history(
            [m.message for m in messages],
            protect_first_n=protect,
            tail_token_budget=config.keep_recent_tokens,
            counter=_CachedCounts(messages, self.counter),
        )
        if not isinstance(plan, Compress):
            return None, None, None
        head_last = messages[plan.head.stop - 1].turn_index if plan.head else -1
        tail_first = messages[plan.tail.start].turn_index if plan.tail else turn_count
        if tail_first - head_last < 2:
            return None, None, None
        head = TurnRange(start_turn=0, end_turn=head_last) if head_last >= 0 else None
        middle = TurnRange(start_turn=head_last + 1, end_turn=tail_first - 1)
        tail = (
            TurnRange(start_turn=tail_first, end_turn=turn_count - 1)
            if tail_first < turn_count
            else None
        )
        return head, middle, tail

    async def _digest(
        self,
        view: LoopView,
        turns: TurnRange,
        folded: Sequence[StoredMessage],
        kept: Sequence[Message],
        config: CompactionConfig,
    ) -> CompactedSection:
        """Return the `keep_compacted` section: the digest, then the restored file reads."""
        prior = digest_of(view.previous)
        already = set()
        if prior is not None and view.previous is not None and view.previous.keep_compacted:
            already = {i for r in view.previous.keep_compacted.messages for i in r.covers}
        fresh = [m.message for m in folded if m.id not in already]
        if self.cheap_passes:
            fresh = prune_tool_results(microcompact(fresh).messages).messages
        if self.redact_secrets:
            fresh = [redact_message(message) for message in fresh]
        folded_tokens = sum(m.token_count for m in folded)
        budget = summary_budget(folded_tokens, max_tokens=config.max_summary_tokens)
        summary = await self.summarizer.summarize(
            SummaryRequest(
                messages=fresh,
                prior_digest=redact(prior) if prior and self.redact_secrets else prior,
                focus_topic=self.focus_topic,
                budget_tokens=budget,
            )
        )
        text = digest_text(summary)  # an empty answer folds nothing: nothing is written
        if self.redact_secrets:
            text = redact(text)
        digest = CompactionSummaryMessage(
            summary=text,
            tokens_before=folded_tokens,
            extra={
                "sessionstore": {
                    DIGEST_MARKER: {
                        "model": summary.model,
                        "prompt_version": summary.prompt_version,
                        "duration_ms": round(summary.duration_ms, 3),
                        "budget_tokens": budget,
                    }
                }
            },
        )
        replacements = [
            ReplacementMessage(
                message=digest,
                covers=[m.id for m in folded],
                token_count=self.counter.count_message(digest),
            )
        ]
        if self.rehydrate and kept:
            replacements += self._restored(folded, kept, replacements[0], config)
        return CompactedSection(range=turns, messages=replacements)

    def _restored(
        self,
        folded: Sequence[StoredMessage],
        kept: Sequence[Message],
        digest: ReplacementMessage,
        config: CompactionConfig,
    ) -> list[ReplacementMessage]:
        """Return the freshest folded file reads, while the loop still shrinks."""
        restored = rehydrate_recent_reads(
            [m.message for m in folded],
            kept,
            token_budget=min(8_000, config.max_summary_tokens),
            counter=self.counter,
        )
        folded_tokens = sum(m.token_count for m in folded)
        chosen = apply_rehydrate(digest.token_count or 0, folded_tokens, restored)
        return [
            ReplacementMessage(
                message=item.message,
                covers=[folded[item.source].id],
                token_count=item.tokens,
            )
            for item in chosen
        ]

    def _block(
        self,
        config: CompactionConfig,
        tokens_before: int,
        keep_first: TurnRange | None,
        compacted: CompactedSection | None,
        recent: CompactedSection | None,
        *,
        first: int = 0,
    ) -> CompactionBlock:
        shown = first + sum(
            r.token_count or 0
            for section in (compacted, recent)
            if section is not None
            for r in section.messages
        )
        return CompactionBlock(
            keep_first=keep_first,
            keep_compacted=compacted,
            keep_recent=recent,
            strategy=self.name,
            config=config.snapshot(),
            tokens_before=tokens_before,
            tokens_after=shown,
        )


class _CachedCounts:
    """A `TokenCounter` that answers a stored message with its cached count."""

    def __init__(self, messages: Sequence[StoredMessage], fallback: TokenCounter) -> None:
        self._counts = {id(m.message): m.token_count for m in messages}
        self._fallback = fallback

    def count_text(self, text: str) -> int:
        return self._fallback.count_text(text)

    def count_message(self, message: Message) -> int:
        cached = self._counts.get(id(message))
        return cached if cached is not None else self._fallback.count_message(message)
