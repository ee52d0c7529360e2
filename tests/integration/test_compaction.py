"""Compaction on SQLite and PostgreSQL: layout, recompaction, time travel, overlays, callbacks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessionstore import (
    AssistantMessage,
    CompactedSection,
    CompactionBlock,
    CompactionCallbacks,
    CompactionConfig,
    CompactionEnded,
    CompactionStarted,
    FixedCount,
    Message,
    ReplacementMessage,
    SessionStore,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    UserMessage,
    build_context,
    compact_session_loops,
    maybe_compact,
)
from sessionstore.config import STORED_SUMMARY_MIN_TOKENS
from sessionstore.errors import (
    BlockNotFoundError,
    InvalidBlockError,
)
from sessionstore.summarizers import summary_budget
from tests.factories import conversation
from tests.integration._helpers import SMALL, check_valid, session_with_loops


async def _raw_snapshot(store: SessionStore, session_id: str) -> list[tuple[int, str]]:
    loops = await store.list_loops(session_id)
    found = []
    for loop in loops:
        found += [(m.id, m.content_hash) for m in await store.get_messages(session_id, loop.id)]
    return found


async def test_compaction_writes_the_layout_of_the_seed_and_keeps_raw(store: SessionStore) -> None:
    session_id = await session_with_loops(store)
    before = await _raw_snapshot(store, session_id)
    result = await compact_session_loops(store, session_id, config=SMALL)
    chain = await store.active_chain(session_id)
    assert result.loop_ids == [loop.id for loop in chain[-4:]]  # FixedCount(3): 3 earlier
    by_loop = {block.loop_id: block for block in result.blocks}
    current = by_loop[chain[-1].id]
    assert current.keep_first == TurnRange(start_turn=0, end_turn=0)
    assert current.keep_compacted is not None
    assert current.keep_recent is not None
    assert current.keep_recent.range.end_turn == chain[-1].turn_count - 1
    for loop in chain[-4:-1]:
        older = by_loop[loop.id]
        assert older.keep_first is None
        assert older.keep_recent is None
        assert older.keep_compacted is not None
        assert older.keep_compacted.range == TurnRange(start_turn=0, end_turn=loop.turn_count - 1)
    assert chain[0].id not in by_loop
    assert await _raw_snapshot(store, session_id) == before
    events = await store.list_compaction_events(session_id)
    assert [e.event for e in events] == ["started", "ended"]
    assert events[1].tokens_after == result.tokens_after < result.tokens_before
    assert events[1].block_id == current.id


async def test_recompaction_supersedes_and_time_travel_rebuilds_the_past(
    store: SessionStore,
) -> None:
    session_id = await session_with_loops(store)
    first = await compact_session_loops(store, session_id, config=SMALL)
    then = await build_context(store, session_id, max_context_tokens=50_000, config=SMALL)
    await store.append_messages(session_id, conversation(turns=4))
    second = await compact_session_loops(store, session_id, config=SMALL)
    assert len(second.blocks) == 1  # earlier loops already summarised the same way
    assert len(second.skipped_loop_ids) == 3
    current_loop = second.blocks[0].loop_id
    assert current_loop is not None
    history = await store.block_history(session_id, current_loop)
    assert [b.generation for b in history] == [1, 2]
    assert first.blocks[0].id == history[0].id
    now = await build_context(store, session_id, max_context_tokens=50_000, config=SMALL)
    assert now.messages != then.messages
    past = await build_context(store, session_id, max_context_tokens=50_000, config=SMALL, as_of=1)
    assert past.messages == then.messages
    created = history[0].created_at
    assert created is not None
    by_time = await build_context(
        store, session_id, max_context_tokens=50_000, config=SMALL, as_of=created
    )
    assert by_time.messages == then.messages
    with pytest.raises(BlockNotFoundError):
        await build_context(store, session_id, max_context_tokens=50_000, as_of=7)


async def test_named_overlays_coexist_and_differ(store: SessionStore) -> None:
    session_id = await session_with_loops(store, loops=2)
    await compact_session_loops(store, session_id, config=SMALL)
    cheap = CompactionConfig(
        keep_first_turns=0, keep_recent_turns=1, max_summary_tokens=60, block_strategy="default"
    )
    await compact_session_loops(store, session_id, config=cheap, overlay="cheap")
    default = await build_context(store, session_id, max_context_tokens=100_000)
    other = await build_context(store, session_id, max_context_tokens=100_000, overlay="cheap")
    check_valid(default)
    check_valid(other)
    assert other.tokens < default.tokens
    loop_id = default.loop_ids[-1]
    overlays = {b.overlay for b in await store.block_history(session_id, loop_id)}
    assert overlays == {"default", "cheap"}


async def test_callbacks_fire_and_a_failing_one_leaves_no_block(store: SessionStore) -> None:
    session_id = await session_with_loops(store, loops=2)
    seen: list[Any] = []

    async def before(event: CompactionStarted) -> None:
        seen.append(event)

    def after(event: CompactionEnded) -> None:
        seen.append(event)
        assert event.tokens_after is not None
        assert event.tokens_after < event.tokens_before
        raise RuntimeError("verification failed")

    callbacks = CompactionCallbacks(before_compaction_start=before, after_compaction_end=after)
    with pytest.raises(RuntimeError, match="verification failed"):
        await compact_session_loops(store, session_id, config=SMALL, callbacks=callbacks)
    assert [type(e) for e in seen] == [CompactionStarted, CompactionEnded]
    for loop in await store.list_loops(session_id):
        assert await store.block_history(session_id, loop.id) == []
    events = await store.list_compaction_events(session_id)
    assert [e.event for e in events] == ["started", "ended"]
    assert events[1].details["status"] == "failed"
    assert "verification failed" in str(events[1].details["error"])


class _BadStrategy:
    """Builds a block whose keep_first is longer than the loop."""

    name = "bad"

    def compact(self, view: Any, config: CompactionConfig, is_most_recent: bool) -> Any:
        return CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=view.loop.turn_count))


class _ForeignStrategy:
    """Builds a block whose provenance names a message of another loop."""

    name = "foreign"

    def __init__(self, foreign_id: int) -> None:
        self.foreign_id = foreign_id

    def compact(self, view: Any, config: CompactionConfig, is_most_recent: bool) -> Any:
        summary = ReplacementMessage(
            message=UserMessage(content="[Summary]"), covers=[self.foreign_id]
        )
        section = CompactedSection(range=TurnRange(start_turn=0, end_turn=0), messages=[summary])
        return CompactionBlock(keep_compacted=section)


@pytest.mark.parametrize("kind", ["keep_first", "foreign"])
async def test_invalid_blocks_are_refused_before_anything_is_written(
    store: SessionStore, kind: str
) -> None:
    session_id = await session_with_loops(store, loops=3)
    chain = await store.active_chain(session_id)
    first_id = (await store.get_messages(session_id, chain[0].id))[0].id
    strategy: Any = _BadStrategy() if kind == "keep_first" else _ForeignStrategy(first_id)
    config = CompactionConfig(compaction_scope=FixedCount(1))
    with pytest.raises(InvalidBlockError):
        await compact_session_loops(store, session_id, strategy=strategy, config=config)
    for loop in chain:
        assert await store.block_history(session_id, loop.id) == []


async def test_maybe_compact_fires_only_near_the_window(store: SessionStore) -> None:
    session_id = await session_with_loops(store, loops=2)
    assert await maybe_compact(store, session_id, max_context_tokens=10**7, config=SMALL) is None
    loaded = (await build_context(store, session_id, max_context_tokens=10**7)).loaded_tokens
    result = await maybe_compact(store, session_id, max_context_tokens=loaded, config=SMALL)
    assert result is not None
    assert result.blocks


async def test_the_loop_that_states_the_task_gets_the_larger_summary_budget(
    store: SessionStore,
) -> None:
    """Its digest holds the task statement: up to half the window, the others a quarter."""
    session_id = await session_with_loops(store, loops=3)
    chain = await store.active_chain(session_id)
    window = 2_000
    result = await compact_session_loops(
        store, session_id, strategy="summarize", max_context_tokens=window
    )
    budgets = {block.loop_id: block.config["max_summary_tokens"] for block in result.blocks}
    assert budgets[chain[0].id] == window // 2
    assert budgets[chain[1].id] == window // 4
    again = await compact_session_loops(
        store, session_id, strategy="summarize", max_context_tokens=window
    )
    # Re-run on the same loops: the closed loops are recognised as summarised already.
    assert {chain[0].id, chain[1].id} <= set(again.skipped_loop_ids)


async def test_a_summary_stored_for_a_small_window_gets_its_floor(store: SessionStore) -> None:
    """A quarter of an 800-token window is 200 tokens; a stored summary gets 400.

    A build re-fits a summary larger than its room, so the context still fits.
    """
    session_id = await session_with_loops(store, loops=2, turns=12)
    result = await compact_session_loops(store, session_id, max_context_tokens=800)
    assert len(result.blocks) == 2  # the task's loop (half the window: 400) and the current
    budgets = {block.config["max_summary_tokens"] for block in result.blocks}
    assert budgets == {STORED_SUMMARY_MIN_TOKENS}
    check_valid(await build_context(store, session_id, max_context_tokens=800))


async def test_a_session_digest_never_shrinks_when_a_short_loop_folds_in(
    store: SessionStore,
) -> None:
    """An update's budget was a fifth of the short loop and the prior digest: each fold of
    a short loop cut what the digest held, the task statement with it, for good."""
    session = await store.create_session(app_name="app", user_id="u")
    statement = (
        "The parser drops the Content-Length header when a request is chunked; it must "
        "keep the header and count the body's bytes, and the fix needs a regression test."
    )
    await store.append_messages(session.id, [UserMessage(content=statement)])
    await store.append_messages(session.id, conversation(turns=40)[1:])
    window = 3_000
    budgets: list[int] = []
    sizes: list[int] = []
    for index in range(8):
        await store.start_loop(session.id)
        await store.append_messages(session.id, conversation(turns=2))
        await compact_session_loops(
            store, session.id, strategy="summarize", max_context_tokens=window
        )
        digest = await store.get_digest(session.id)
        if digest is None:
            continue
        budget = digest.details["budget_tokens"]
        assert isinstance(budget, int)
        budgets.append(budget)
        sizes.append(digest.token_count)
        # The session's task: whole in every digest, however many short loops folded in.
        assert statement in digest.message.summary, index
    assert len(budgets) >= 3
    # Never less room than the digest it extends took.
    assert all(budget >= size for budget, size in zip(budgets[1:], sizes, strict=False))
    # The digest holds the task: it gets the task's share of the window, not a quarter.
    assert max(budgets) > window // 4


async def test_a_session_digest_updated_loop_by_loop_keeps_the_records_it_read(
    store: SessionStore,
) -> None:
    """An update's room was a fifth of the prior digest and the new loop (a fifth of a
    fifth of the history): the records a tool read in a later loop (a user's
    reservations and payment ids) went at once, where one digest of the same loops kept
    them."""
    session = await store.create_session(app_name="app", user_id="u")
    policy = "\n".join(
        f"- You must never {act} without the user's explicit confirmation."
        for act in (
            "book a flight",
            "cancel a reservation",
            "change a passenger's name",
            "add checked bags",
            "upgrade a cabin",
            "refund a payment",
            "issue a travel certificate",
        )
    )
    await store.append_messages(
        session.id, [SystemMessage(content=f"# Airline policy\n{policy}"), *conversation(turns=4)]
    )
    records = {
        "user_id": "ivan_rossi_8555",
        "reservations": ["OWZ4XL", "8WMF4C", "L2H5FP", "F3IQK1"],
        "payment_methods": {
            "gift_card_7344518": {"id": "gift_card_7344518"},
            "credit_card_9659780": {"id": "credit_card_9659780"},
        },
        # What a long record holds besides: the loop that reads it is most of the history.
        "membership": "gold",
        "saved_passengers": [
            {"first_name": name, "last_name": "Rossi", "dob": f"19{60 + index}-01-0{index % 9 + 1}"}
            for index, name in enumerate(("Ivan", "Anna", "Luca", "Sofia", "Marco") * 8)
        ],
    }
    loops: list[list[Message]] = [
        [
            UserMessage(content="My user id is ivan_rossi_8555."),
            AssistantMessage(
                content=[ToolCall(id="c1", name="get_user_details", arguments={"user": "ivan"})]
            ),
            ToolResultMessage(
                tool_call_id="c1",
                tool_name="get_user_details",
                content=[TextContent(text=json.dumps(records))],
            ),
            AssistantMessage(content=[TextContent(text="Which reservation is it?")]),
        ]
    ]
    loops += [
        [
            UserMessage(content="Yes, go ahead with that."),
            AssistantMessage(content=[TextContent(text="Done: the change is made.")]),
        ]
    ] * 8
    window = 1_000
    for messages in loops:
        await store.start_loop(session.id)
        await store.append_messages(session.id, messages)
        await compact_session_loops(
            store, session.id, strategy="summarize", max_context_tokens=window
        )
    digest = await store.get_digest(session.id)
    assert digest is not None
    assert digest.extends_id is not None
    chain = await store.list_loops(session.id)
    ids = [loop.id for loop in chain]
    through = ids.index(digest.through_loop_id)
    assert through >= 2  # the records' loop is folded in
    # It records the raw tokens of every loop it stands for, its predecessors' too, and
    # takes its room as a share of them, as one digest of those loops written at once.
    history = sum(loop.token_total for loop in chain[: through + 1])
    assert digest.details["history_tokens"] == history
    budget = digest.details["budget_tokens"]
    assert isinstance(budget, int)
    assert budget >= summary_budget(history, max_tokens=window // 2)
    for record in ("8WMF4C", "L2H5FP", "F3IQK1", "gift_card_7344518", "credit_card_9659780"):
        assert record in digest.message.summary, record
