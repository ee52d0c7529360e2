"""Audit on SQLite and PostgreSQL: per turn, raw messages against what the overlay shows."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from sessionstore import (
    AssistantMessage,
    CompactionBlock,
    CompactionConfig,
    SessionDigest,
    SessionStore,
    StoredMessage,
    ToolResultMessage,
    UserMessage,
    audit_session,
    build_context,
    compact_session_loops,
    expand,
)
from sessionstore._audit import audit_snapshots
from sessionstore._scope import ChainEntry
from sessionstore.errors import BlockNotFoundError
from tests.factories import conversation

CONFIG = CompactionConfig(
    keep_first_turns=1,
    keep_recent_turns=3,
    max_summary_tokens=400,
    tool_output_max_lines=6,
    block_strategy="default",  # the seed's three levels, whose sections the audit shows
)


async def _compacted_session(store: SessionStore, loops: int = 5) -> str:
    session = await store.create_session(app_name="app", user_id="u")
    for index in range(loops):
        if index:
            await store.start_loop(session.id)
        await store.append_messages(session.id, conversation(turns=8))
    await compact_session_loops(store, session.id, config=CONFIG)
    return session.id


async def test_audit_says_what_became_of_every_turn(store: SessionStore) -> None:
    session_id = await _compacted_session(store)
    audit = await audit_session(store, session_id, config=CONFIG)
    assert [loop.in_scope for loop in audit.loops] == [False, True, True, True, True]
    assert audit.loops[0].context_tokens == 0
    assert audit.loops[0].raw_tokens > 0
    current = audit.loops[-1]
    assert current.turns[0].action == "kept"  # keep_first
    middle = current.turns[1 : len(current.turns) - 3]
    assert middle
    assert all(turn.action in ("summarised", "omitted") for turn in middle)
    recent = current.turns[-3:]
    tool_results = [
        m
        for turn in recent
        for m in turn.messages
        if isinstance(m.message.message, ToolResultMessage)
    ]
    assert tool_results
    assert {m.action for m in tool_results} == {"truncated"}
    others = [m for turn in recent for m in turn.messages if m not in tool_results]
    assert {m.action for m in others} == {"kept"}
    for loop in audit.loops[1:-1]:
        assert {turn.action for turn in loop.turns} <= {"summarised", "omitted"}
    # Totals: each loop in scope counts what its overlay shows; the ratio says how much.
    assert audit.raw_tokens == sum(loop.raw_tokens for loop in audit.loops)
    assert 0 < audit.ratio < 1
    context = await build_context(store, session_id, max_context_tokens=10**6, config=CONFIG)
    assert audit.context_tokens == context.tokens
    data = audit.to_dict()
    assert data["raw_tokens"] == audit.raw_tokens
    assert data["loops"][-1]["turns"][0]["action"] == "kept"


async def test_expand_returns_the_raw_messages_a_summary_stands_for(store: SessionStore) -> None:
    session_id = await _compacted_session(store, loops=2)
    audit = await audit_session(store, session_id, config=CONFIG)
    turn = next(t for t in audit.loops[-1].turns if t.action == "summarised")
    (replacement,) = turn.replacements
    assert replacement.id is not None
    raw = await expand(store, session_id, replacement.id)
    assert [m.id for m in raw] == [m.message.id for m in turn.messages]
    assert isinstance(raw[0].message, AssistantMessage)
    with pytest.raises(BlockNotFoundError):
        await expand(store, session_id, 10**9)


async def test_turns_appended_after_a_compaction_are_kept(store: SessionStore) -> None:
    session_id = await _compacted_session(store, loops=1)
    await store.append_messages(session_id, [UserMessage(content="and also this")])
    audit = await audit_session(store, session_id, config=CONFIG)
    last = audit.loops[-1].turns[-1]
    assert last.action == "kept"
    assert last.context_tokens == last.raw_tokens


async def test_a_tight_summary_budget_shows_omitted_turns(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, conversation(turns=30))
    tight = CompactionConfig(
        keep_first_turns=1, keep_recent_turns=2, max_summary_tokens=120, block_strategy="default"
    )
    await compact_session_loops(store, session.id, config=tight)
    audit = await audit_session(store, session.id, config=tight)
    actions = [turn.action for turn in audit.loops[0].turns]
    assert "summarised" in actions
    assert "omitted" in actions
    assert actions.index("summarised") < actions.index("omitted")  # the oldest are summarised


async def test_audit_of_one_loop(store: SessionStore) -> None:
    session_id = await _compacted_session(store, loops=3)
    chain = await store.active_chain(session_id)
    audit = await audit_session(store, session_id, loop_id=chain[1].id, only_loop=True)
    assert [loop.loop.id for loop in audit.loops] == [chain[1].id]


async def test_a_summarised_follow_up_request_is_pinned_and_counted(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    follow_up = UserMessage(content="also rename the module, please")
    turns = conversation(turns=10)
    await store.append_messages(session.id, [*turns[:8], follow_up, *turns[8:]])
    await store.append_messages(session.id, conversation(turns=10)[1:])
    await compact_session_loops(store, session.id, config=CONFIG)
    audit = await audit_session(store, session.id, config=CONFIG)
    (pinned,) = [m for t in audit.loops[-1].turns for m in t.messages if m.pinned]
    assert pinned.message.message == follow_up
    assert pinned.action == "summarised"
    context = await build_context(store, session.id, max_context_tokens=10**6, config=CONFIG)
    assert follow_up in context.messages
    assert audit.context_tokens == context.tokens


async def _two_overlays(store: SessionStore) -> str:
    """Four loops compacted twice in `default` and once in `tight`."""
    session_id = await _compacted_session(store, loops=3)
    await store.start_loop(session_id)
    await store.append_messages(session_id, conversation(turns=8))
    await compact_session_loops(store, session_id, config=CONFIG)
    tight = CONFIG.model_copy(update={"keep_recent_turns": 1})
    await compact_session_loops(store, session_id, config=tight, overlay="tight")
    return session_id


async def test_snapshots_audit_every_overlay_after_every_compaction(store: SessionStore) -> None:
    session_id = await _two_overlays(store)

    snapshots = await audit_snapshots(store, session_id)

    assert [(s.overlay, s.as_of is None) for s in snapshots] == [
        ("default", False),
        ("default", False),
        ("default", True),
        ("tight", False),
        ("tight", True),
    ]
    first, second, now = snapshots[:3]
    # Time travel: the first compaction saw three loops, the second four.
    assert len(first.audit.loops) == 3
    assert len(second.audit.loops) == 4
    assert {b.generation for b in first.blocks} == {1}
    assert first.as_of is not None
    assert second.as_of is not None
    assert first.as_of < second.as_of
    assert all(block.created_at == second.as_of for block in second.blocks)
    assert first.audit.loops[-1].block is not None
    assert first.audit.loops[-1].block.generation == 1
    assert second.audit.loops[2].block is not None
    assert second.audit.loops[2].block.generation == 2
    # Each snapshot is the audit as of its moment; the last one is the audit now.
    assert first.audit == await audit_session(store, session_id, as_of=first.as_of)
    assert now.audit == await audit_session(store, session_id)
    assert snapshots[-1].audit == await audit_session(store, session_id, overlay="tight")
    assert now.audit != snapshots[-1].audit


@pytest.mark.parametrize("moments", [0, 1, 2, 3, 5])
async def test_snapshots_of_the_newest_moments_only(store: SessionStore, moments: int) -> None:
    """`moments` keeps each overlay's newest compactions, and now; each audit is unchanged."""
    session_id = await _two_overlays(store)
    every = await audit_snapshots(store, session_id)

    newest = await audit_snapshots(store, session_id, moments=moments)

    expected = []
    for overlay in ("default", "tight"):
        taken = [s for s in every if s.overlay == overlay and s.as_of is not None]
        now = [s for s in every if s.overlay == overlay and s.as_of is None]
        expected += [*taken[-moments:], *now] if moments else now
    assert newest == expected
    assert len(newest) == 2 + min(moments, 2) + min(moments, 1)


async def test_snapshots_refuse_a_negative_number_of_moments(store: SessionStore) -> None:
    session_id = await _compacted_session(store, loops=1)
    with pytest.raises(ValueError, match="moments must be at least 0"):
        await audit_snapshots(store, session_id, moments=-1)


class _CountingReader:
    """An `AuditReader` that counts, by loop, the message reads it passes to the store."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.reads: Counter[int | None] = Counter()

    async def chain_blocks(self, session_id: str, **options: Any) -> list[ChainEntry]:
        return await self.store.chain_blocks(session_id, **options)

    async def get_digest(self, session_id: str, **options: Any) -> SessionDigest | None:
        return await self.store.get_digest(session_id, **options)

    async def get_messages(
        self, session_id: str, loop_id: int | None = None
    ) -> list[StoredMessage]:
        self.reads[loop_id] += 1
        return await self.store.get_messages(session_id, loop_id)

    async def block_history(self, session_id: str, loop_id: int) -> list[CompactionBlock]:
        return await self.store.block_history(session_id, loop_id)


async def test_snapshots_read_a_closed_loop_once_and_the_open_loop_each_time(
    store: SessionStore,
) -> None:
    session_id = await _compacted_session(store, loops=3)
    for _ in range(2):
        await store.start_loop(session_id)
        await store.append_messages(session_id, conversation(turns=8))
        await compact_session_loops(store, session_id, config=CONFIG)
    reader = _CountingReader(store)

    snapshots = await audit_snapshots(reader, session_id)

    chain = await store.active_chain(session_id)
    assert len(snapshots) == 4  # three compactions, and now
    assert all(loop.closed_at is not None for loop in chain[:-1])
    assert chain[-1].closed_at is None
    assert {loop.id: reader.reads[loop.id] for loop in chain[:-1]} == {
        loop.id: 1 for loop in chain[:-1]
    }
    # The open loop, once for each snapshot that shows it: the third compaction's, and now.
    showing = [s for s in snapshots if s.audit.loops[-1].loop.id == chain[-1].id]
    assert len(showing) == 2
    assert reader.reads[chain[-1].id] == len(showing)
    # The same audits as each read on its own.
    for snapshot in snapshots:
        assert snapshot.audit == await audit_session(store, session_id, as_of=snapshot.as_of)


async def test_snapshots_of_a_session_never_compacted(store: SessionStore) -> None:
    session_id = await _compacted_session(store, loops=0)
    assert [(s.overlay, s.as_of, s.blocks) for s in await audit_snapshots(store, session_id)] == [
        ("default", None, [])
    ]
