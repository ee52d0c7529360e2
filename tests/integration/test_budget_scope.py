"""A built context is scoped by its budget by default, on SQLite and PostgreSQL.

Every loop while the whole chain fits; loops leave only when the budget requires, and the
session digest then stands for them (never beside them); `FixedCount` only when chosen.
"""

from __future__ import annotations

from sessionstore import (
    AssistantMessage,
    CompactionConfig,
    FixedCount,
    SessionStore,
    TokenBudget,
    UserMessage,
    audit_session,
    build_context,
    compact_session_loops,
    maybe_compact,
)


async def chain_of(store: SessionStore, loops: int, words: int = 100) -> tuple[str, list[int]]:
    session = await store.create_session(app_name="a", user_id="u")
    ids = []
    for n in range(loops):
        loop = await store.start_loop(session.id)
        ids.append(loop.id)
        await store.append_messages(
            session.id,
            [
                UserMessage(content=f"request {n}: " + "word " * words),
                AssistantMessage(content=f"answer {n}: " + "done " * words),
            ],
        )
    return session.id, ids


async def test_every_loop_is_in_the_context_while_the_chain_fits(store: SessionStore) -> None:
    sid, ids = await chain_of(store, 8)
    context = await build_context(store, sid, max_context_tokens=100_000)
    assert context.loop_ids == ids
    assert context.scope == TokenBudget()
    assert context.left_out_tokens == 0
    assert context.trimmed_messages == 0
    # The compaction default does not narrow a context, unless chosen explicitly.
    policy = await build_context(store, sid, max_context_tokens=100_000, config=CompactionConfig())
    assert policy.loop_ids == ids
    chosen = CompactionConfig(compaction_scope=FixedCount(count=3))
    narrowed = await build_context(store, sid, max_context_tokens=100_000, config=chosen)
    assert narrowed.loop_ids == ids[-4:]
    assert (
        await build_context(store, sid, max_context_tokens=100_000, scope=FixedCount(1))
    ).loop_ids == ids[-2:]


async def test_loops_leave_only_when_the_budget_requires_and_the_gate_hears_of_it(
    store: SessionStore,
) -> None:
    sid, ids = await chain_of(store, 8)
    loops = {loop.id: loop for loop in await store.active_chain(sid)}
    per_loop = loops[ids[-1]].token_total
    window = per_loop * 3 + per_loop * 9 // 10  # room for three loops, not four
    context = await build_context(store, sid, max_context_tokens=window)
    # The three newest loops, and the chain's first (the session's task), which stays
    # while no digest stands for the loops left out (the trimmer shortens it).
    assert context.loop_ids == [ids[0], *ids[-3:]]
    assert context.tokens <= window
    # The newest loop left out, with no digest standing for it, is what the gate counts.
    assert context.left_out_tokens == loops[ids[-4]].token_total
    # So maybe_compact fires: the chain no longer fits.
    assert context.loaded_tokens + context.left_out_tokens > 0.85 * window
    result = await maybe_compact(store, sid, max_context_tokens=window)
    assert result is not None
    assert not result.noop


async def test_the_digest_stands_for_the_loops_it_folds_and_is_never_shown_beside_them(
    store: SessionStore,
) -> None:
    sid, ids = await chain_of(store, 8)
    config = CompactionConfig(compaction_scope=FixedCount(count=1))
    await compact_session_loops(store, sid, config=config, max_context_tokens=100_000)
    digest = await store.get_digest(sid)
    assert digest is not None
    assert digest.through_loop_id == ids[-3]
    # The agent goes on: a new loop, no block yet, so no recorded scope.
    loop = await store.start_loop(sid)
    await store.append_messages(sid, [UserMessage(content="and now?")])

    context = await build_context(store, sid, max_context_tokens=100_000)

    # Room for every loop, but the digest stands for the ones it folds: they are not
    # shown raw beside it; every loop after it is.
    assert context.loop_ids == [*ids[-2:], loop.id]
    assert context.items[0].source == "digest"
    assert context.left_out_tokens == 0
    folded = {loop_id for loop_id, _ in digest.folded}
    assert folded == set(ids[:-2])
    assert not folded & {item.loop_id for item in context.items}
    # The audit agrees with the loader.
    audit = await audit_session(store, sid, max_context_tokens=100_000)
    assert [a.loop.id for a in audit.loops if a.in_scope] == context.loop_ids


async def test_compacted_loops_the_budget_leaves_out_stand_in_their_summaries(
    store: SessionStore,
) -> None:
    """With no digest, a loop left out that was compacted is shown by its summary.

    Compacted with a large window (no digest: every loop was in scope), then read at a
    budget the newest loop alone is over: the loops between the task and the newest
    one were left out with nothing standing for them. Those with a block now stay (the
    trimmer merges and shortens their summaries); one never compacted still leaves.
    """
    sid, ids = await chain_of(store, 4)
    config = CompactionConfig(compaction_scope=FixedCount(count=3))
    await compact_session_loops(store, sid, config=config, max_context_tokens=100_000)
    assert await store.get_digest(sid) is None
    middle = [(loop.id, block) for loop, block in await store.chain_blocks(sid)][1:]
    with_block = [loop_id for loop_id, block in middle if block is not None]
    without = [loop_id for loop_id, block in middle if block is None]
    assert with_block  # the test needs both kinds
    assert without
    newest = await store.start_loop(sid)
    await store.append_messages(
        sid,
        [
            UserMessage(content="request last: " + "word " * 2000),
            AssistantMessage(content="ok " * 500),
        ],
    )

    context = await build_context(store, sid, max_context_tokens=3_000)

    assert context.loop_ids == [ids[0], *with_block, newest.id]
    assert context.tokens <= 3_000
    text = "\n".join(getattr(item.message, "text", "") for item in context.items)
    # Their summaries, merged into one handoff: the newest one's request is its task.
    assert f"request {ids.index(with_block[-1])}:" in text
    # The newest loop still left out (never compacted) is what the gate counts.
    assert context.left_out_tokens == sum(
        loop.token_total for loop in await store.active_chain(sid) if loop.id == without[-1]
    )
    # The audit agrees with the loader: what the model sees is in scope, the rest not.
    audit = await audit_session(store, sid, max_context_tokens=3_000)
    assert [a.loop.id for a in audit.loops if a.in_scope] == context.loop_ids
