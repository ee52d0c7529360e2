"""SummarizingBlockCompaction: head, one digest with provenance, a token-protected tail."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from sessionstore import (
    AssistantMessage,
    BlockCompactionStrategy,
    CompactionConfig,
    CompactionSummaryMessage,
    Message,
    SummarizingBlockCompaction,
    Summary,
    SummaryRequest,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    get_block_strategy,
)
from sessionstore.config import STORED_SUMMARY_MIN_TOKENS
from sessionstore.strategies import RESTORED_FILE_PREFIX, digest_of
from tests.unit._loops import stored, tool_turn, user


class Recording:
    """A `Summarizer` that records its requests and answers with a fixed digest."""

    def __init__(self, text: str = "## Active Task\nfix the bug") -> None:
        self.text = text
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.requests.append(request)
        return Summary(text=self.text, model="recording", prompt_version="t1")


def long_loop(turns: int = 30, output: str = "x" * 400) -> list[Message]:
    messages: list[Message] = [user("The test in tests/test_io.py fails, please fix it.")]
    for i in range(1, turns):
        messages += tool_turn(i, text=f"step {i}", output=output)
    return messages


CONFIG = CompactionConfig(keep_first_turns=1, keep_recent_tokens=600, max_summary_tokens=500)


async def test_the_middle_becomes_one_digest_covering_every_folded_message() -> None:
    view = stored(long_loop())
    summarizer = Recording()
    strategy = SummarizingBlockCompaction(summarizer, rehydrate=False)
    assert isinstance(strategy, BlockCompactionStrategy)
    block = await strategy.compact(view, CONFIG, is_most_recent=True)
    assert block.strategy == "summarize"
    assert block.keep_first is not None
    assert block.keep_first.start_turn == 0
    section = block.keep_compacted
    assert section is not None
    (digest,) = section.messages
    assert isinstance(digest.message, CompactionSummaryMessage)
    assert digest.message.summary == summarizer.text
    assert digest_of(block) == summarizer.text
    # Provenance: exactly the raw messages of the folded turns.
    folded = view.turn_messages(section.range)
    assert digest.covers == [m.id for m in folded]
    assert block.keep_recent is not None
    assert block.keep_first.end_turn + 1 == section.range.start_turn
    assert section.range.end_turn + 1 == block.keep_recent.range.start_turn
    assert block.keep_recent.range.end_turn == view.turn_map.turn_count() - 1
    # The tail is protected by tokens: within 1.5 times the budget.
    tail = sum(r.token_count or 0 for r in block.keep_recent.messages)
    assert 0 < tail <= 1.5 * CONFIG.keep_recent_tokens
    (request,) = summarizer.requests
    assert request.budget_tokens == 500
    assert list(request.messages) == [m.message for m in folded]
    assert block.tokens_after < block.tokens_before


async def test_a_re_compaction_carries_the_previous_digest_forward() -> None:
    messages = long_loop()
    view = stored(messages)
    first = Recording("## Active Task\nfirst digest")
    block = await SummarizingBlockCompaction(first, rehydrate=False).compact(view, CONFIG, True)
    more = messages + tool_turn(99, text="more work", output="y" * 400) * 1
    more += tool_turn(100, text="even more", output="z" * 400)
    grown = replace(stored(more), previous=block)
    second = Recording("## Active Task\nsecond digest")
    again = await SummarizingBlockCompaction(second, rehydrate=False).compact(grown, CONFIG, True)
    (request,) = second.requests
    assert request.prior_digest == "## Active Task\nfirst digest"
    assert block.keep_compacted is not None
    folded_before = {i for r in block.keep_compacted.messages for i in r.covers}
    # Only what the first digest did not fold is given to the summarizer again.
    assert request.messages
    assert all(
        m.id not in folded_before
        for m in grown.messages
        if any(m.message is sent for sent in request.messages)
    )
    assert digest_of(again) == "## Active Task\nsecond digest"


async def test_an_older_loop_is_one_digest_of_itself() -> None:
    view = stored(long_loop(6))
    block = await SummarizingBlockCompaction(Recording(), rehydrate=False).compact(
        view, CONFIG, is_most_recent=False
    )
    assert block.keep_first is None
    assert block.keep_recent is None
    assert block.keep_compacted is not None
    assert block.keep_compacted.range.start_turn == 0
    assert block.keep_compacted.range.end_turn == view.turn_map.turn_count() - 1
    assert block.keep_compacted.messages[0].covers == [m.id for m in view.messages]


async def test_a_short_loop_has_nothing_to_fold() -> None:
    view = stored([user(), *tool_turn(1)])
    summarizer = Recording()
    block = await SummarizingBlockCompaction(summarizer).compact(view, CONFIG, True)
    assert block.keep_compacted is None
    assert summarizer.requests == []
    assert block.tokens_after == block.tokens_before  # so the caller leaves it raw


async def test_secrets_are_redacted_from_what_the_summarizer_sees_and_says() -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 6
    messages = long_loop()
    caller = messages[3]
    assert isinstance(caller, AssistantMessage)
    messages[4] = ToolResultMessage(
        tool_call_id=caller.tool_calls[0].id,
        tool_name="bash",
        content=f"OPENAI_API_KEY={secret}",
    )
    summarizer = Recording(f"## Active Task\nuse {secret}")
    block = await SummarizingBlockCompaction(summarizer, rehydrate=False).compact(
        stored(messages), CONFIG, True
    )
    sent = json.dumps([m.model_dump(mode="json") for m in summarizer.requests[0].messages])
    assert secret not in sent
    text = digest_of(block)
    assert text is not None
    assert secret not in text


async def test_the_freshest_folded_file_read_is_restored_after_the_digest() -> None:
    messages: list[Message] = [user("Read src/app.py and fix the crash.")]
    call = ToolCall(id="r1", name="read_file", arguments=json.dumps({"path": "src/app.py"}))
    messages += [
        AssistantMessage(content=[call]),
        ToolResultMessage(tool_call_id="r1", tool_name="read_file", content="def main():\n    1/0"),
    ]
    for i in range(2, 30):
        messages += tool_turn(i, text=f"step {i}", output="x" * 400)
    view = stored(messages)
    block = await SummarizingBlockCompaction(Recording()).compact(view, CONFIG, True)
    section = block.keep_compacted
    assert section is not None
    restored = [r for r in section.messages if isinstance(r.message, UserMessage)]
    assert len(restored) == 1
    (message,) = [r.message for r in restored if isinstance(r.message, UserMessage)]
    assert message.text.startswith(RESTORED_FILE_PREFIX)
    assert "src/app.py" in message.text
    assert restored[0].covers == [view.messages[2].id]  # the read's result


def test_summarize_is_a_registered_strategy() -> None:
    assert isinstance(get_block_strategy("summarize"), SummarizingBlockCompaction)


@pytest.mark.parametrize("window", [2_000, 100_000, 1_000_000])
def test_a_config_is_sized_to_the_window_it_compacts_for(window: int) -> None:
    capped = CompactionConfig().within(window)
    assert capped.max_summary_tokens <= max(1, window // 4)
    # Seed 001: the tail kept verbatim scales with the window, not a fixed 6,000 tokens.
    assert capped.keep_recent_tokens == window // 10
    assert CompactionConfig(summary_target_ratio=0.2).within(window).keep_recent_tokens == (
        window // 5
    )
    explicit = CompactionConfig(max_summary_tokens=5_000, keep_recent_tokens=9_000)
    assert explicit.within(window) == explicit  # what a user set is kept


@pytest.mark.parametrize("window", [200, 1_000, 1_600, 100_000])
def test_a_stored_summary_gets_at_least_its_floor_whatever_the_window(window: int) -> None:
    """A build re-fits a summary larger than its room; what a stored one leaves out is lost."""
    config = CompactionConfig()
    stored = config.within(window, min_summary_tokens=STORED_SUMMARY_MIN_TOKENS)
    share = max(1, window // 4)
    assert stored.max_summary_tokens == min(
        config.max_summary_tokens, max(share, STORED_SUMMARY_MIN_TOKENS)
    )
    assert config.within(window).max_summary_tokens == min(config.max_summary_tokens, share)
    explicit = CompactionConfig(max_summary_tokens=150)  # what a user set is kept
    assert explicit.within(window, min_summary_tokens=400).max_summary_tokens == 150


@pytest.mark.parametrize("window", [2_000, 6_000, 1_000_000])
def test_the_loop_that_states_the_task_may_take_half_the_window(window: int) -> None:
    """Its digest holds the task statement, which a context loses last."""
    config = CompactionConfig()
    task = config.within(window, states_task=True).max_summary_tokens
    assert task == min(config.max_summary_tokens, window // 2)
    assert task >= config.within(window).max_summary_tokens
    explicit = CompactionConfig(max_summary_tokens=300)
    assert explicit.within(window, states_task=True).max_summary_tokens == 300
