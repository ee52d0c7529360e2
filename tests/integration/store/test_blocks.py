"""Compaction blocks and events, on every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from sessionstore import (
    CompactedSection,
    CompactionBlock,
    ReplacementMessage,
    SessionStore,
    StoredMessage,
    TurnRange,
    UserMessage,
)
from sessionstore.errors import (
    InvalidBlockError,
)
from tests.factories import (
    conversation,
)
from tests.integration.store._helpers import new_session

# ── blocks ─────────────────────────────────────────────────────────────────────


def _summary_block(
    stored: Sequence[StoredMessage], start: int, end: int, overlay: str = "default"
) -> CompactionBlock:
    covered = [m for m in stored if start <= m.turn_index <= end]
    return CompactionBlock(
        overlay=overlay,
        keep_first=TurnRange(start_turn=0, end_turn=0),
        keep_compacted=CompactedSection(
            range=TurnRange(start_turn=start, end_turn=end),
            messages=[
                ReplacementMessage(
                    message=UserMessage(content=f"[Summary] turns {start}-{end}"),
                    covers=[m.id for m in covered],
                )
            ],
        ),
        keep_recent=CompactedSection(
            range=TurnRange(start_turn=end + 1, end_turn=end + 1),
            messages=[
                ReplacementMessage(message=m.message, covers=[m.id])
                for m in stored
                if m.turn_index == end + 1
            ],
        ),
        strategy="test",
        config={"keep_first_turns": 1},
        tokens_before=sum(m.token_count for m in covered),
        tokens_after=10,
    )


async def test_write_and_read_a_block(store: SessionStore) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(6))
    loop_id = stored[0].loop_id
    written = await store.write_block(session_id, loop_id, _summary_block(stored, 1, 4))
    assert written.generation == 1
    assert written.id is not None
    assert written.keep_compacted is not None
    assert all(r.id is not None and r.token_count for r in written.keep_compacted.messages)
    read = await store.get_block(session_id, loop_id)
    assert read == written
    assert await store.get_block(session_id, loop_id, overlay="other") is None


async def test_new_block_supersedes_and_history_keeps_the_old(store: SessionStore) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(6))
    loop_id = stored[0].loop_id
    one = await store.write_block(session_id, loop_id, _summary_block(stored, 1, 3))
    two = await store.write_block(session_id, loop_id, _summary_block(stored, 1, 5))
    cheap = await store.write_block(session_id, loop_id, _summary_block(stored, 1, 2, "cheap"))
    assert (one.generation, two.generation, cheap.generation) == (1, 2, 1)
    assert await store.get_block(session_id, loop_id) == two
    assert await store.get_block(session_id, loop_id, generation=1) == one
    assert await store.get_block(session_id, loop_id, overlay="cheap") == cheap
    assert one.created_at is not None
    assert two.created_at is not None
    assert await store.get_block(session_id, loop_id, as_of=one.created_at) == one
    before = one.created_at - timedelta(seconds=1)
    assert await store.get_block(session_id, loop_id, as_of=before) is None
    assert await store.block_history(session_id, loop_id, overlay="default") == [one, two]
    assert await store.block_history(session_id, loop_id) == [one, two, cheap]


async def test_invalid_blocks_are_refused_and_nothing_is_written(store: SessionStore) -> None:
    session_id = await new_session(store)
    stored = await store.append_messages(session_id, conversation(3))
    loop_id = stored[0].loop_id
    other = await store.append_messages(await new_session(store), conversation(1))
    turns = (await store.get_loop(session_id, loop_id)).turn_count
    out_of_bounds = CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=turns))
    foreign = CompactionBlock(
        keep_compacted=CompactedSection(
            range=TurnRange(start_turn=0, end_turn=1),
            messages=[ReplacementMessage(message=UserMessage(content="s"), covers=[other[0].id])],
        )
    )
    outside = CompactionBlock(
        keep_compacted=CompactedSection(
            range=TurnRange(start_turn=1, end_turn=1),
            messages=[ReplacementMessage(message=UserMessage(content="s"), covers=[stored[0].id])],
        )
    )
    with pytest.raises(InvalidBlockError, match="out of bounds"):
        await store.write_block(session_id, loop_id, out_of_bounds)
    with pytest.raises(InvalidBlockError, match="not in loop"):
        await store.write_block(session_id, loop_id, foreign)
    with pytest.raises(InvalidBlockError, match="outside its turn range"):
        await store.write_block(session_id, loop_id, outside)
    assert await store.block_history(session_id, loop_id) == []


async def test_compaction_events_are_listed_in_order(store: SessionStore) -> None:
    session_id = await new_session(store)
    (message,) = await store.append_messages(session_id, [UserMessage(content="x")])
    started = await store.record_compaction_event(
        session_id, event="started", tokens_before=500, loop_id=message.loop_id
    )
    ended = await store.record_compaction_event(
        session_id,
        event="ended",
        tokens_before=500,
        tokens_after=120,
        duration_ms=3.5,
        loop_id=message.loop_id,
        details={"strategy": "default"},
    )
    assert await store.list_compaction_events(session_id) == [started, ended]
    with pytest.raises(ValueError, match="started"):
        await store.record_compaction_event(session_id, event="paused", tokens_before=0)
