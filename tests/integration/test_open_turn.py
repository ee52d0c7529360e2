"""A loop's open latest turn: compaction leaves it raw, and no block may cover it.

A tool result joins the loop's latest turn when an assistant message that made tool calls
began it (`TurnAssigner`). While one of those calls has no result, a block covering the
turn would not stand for the result appended after the block was written, and the context
would never show it. Once every call is answered, the turn is compacted as any other.
"""

from __future__ import annotations

import pytest
from sqlalchemy import update

from sessionstore import (
    AssistantMessage,
    CompactedSection,
    CompactionBlock,
    CompactionConfig,
    Message,
    ReplacementMessage,
    SessionStore,
    StoredMessage,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    UserMessage,
    build_context,
    compact_session_loops,
    maybe_compact,
)
from sessionstore.errors import InvalidBlockError
from sessionstore.store._tables import loops as loops_table
from tests.integration._helpers import late_orphans

CONFIG = CompactionConfig(
    keep_first_turns=1, keep_recent_turns=1, keep_recent_tokens=200, block_strategy="default"
)


def _work(turns: int) -> list[Message]:
    """A request, then `turns` answered tool calls, each its own turn."""
    messages: list[Message] = [UserMessage(content="fix the failing test in parser.py " * 5)]
    for n in range(turns):
        messages += [
            AssistantMessage(content=[ToolCall(id=f"c{n}", name="bash", arguments={"n": n})]),
            ToolResultMessage(tool_call_id=f"c{n}", tool_name="bash", content=f"out {n} " * 60),
        ]
    return messages


def _open_turn(calls: int = 2) -> AssistantMessage:
    return AssistantMessage(
        content=[ToolCall(id=f"open{n}", name="read", arguments={"n": n}) for n in range(calls)]
    )


def _result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="read", content=f"{call_id} " * 40)


def _check_sections(block: CompactionBlock, messages: list[StoredMessage]) -> None:
    """Each section with replacements stands for exactly the raw messages of its turns."""
    for _, section in block.sections():
        in_range = {m.id for m in messages if m.turn_index in section.range}
        covered = {c for r in section.messages for c in r.covers}
        assert covered == in_range, section.range


async def test_compaction_leaves_the_open_turn_raw_and_a_late_result_is_shown(
    store: SessionStore,
) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, [*_work(6), _open_turn(), _result("open0")])
    (loop,) = await store.list_loops(session.id)
    assert loop.turn_count == 8

    result = await compact_session_loops(store, session.id, config=CONFIG)
    (block,) = result.blocks
    ends = [section.range.end_turn for _, section in block.sections()]
    assert max(ends) == 6  # turn 7, open, is left raw after the block

    late = await store.append_messages(session.id, [_result("open1")])
    assert late[0].turn_index == 7  # it joined the open turn
    messages = await store.get_messages(session.id)
    _check_sections(block, messages)
    context = await build_context(store, session.id, max_context_tokens=100_000)
    raw = {i.message_id for i in context.items if i.source == "raw"}
    assert {m.id for m in messages if m.turn_index == 7} <= raw
    assert not context.orphan_results
    assert not [i for i in context.items if i.source == "synthetic"]


async def test_a_turn_that_closed_is_compacted_once_the_next_one_starts(
    store: SessionStore,
) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, [*_work(6), _open_turn(), _result("open0")])
    first = await compact_session_loops(store, session.id, config=CONFIG)
    assert max(s.range.end_turn for _, s in first.blocks[0].sections()) == 6
    await store.append_messages(session.id, [UserMessage(content="now run the tests")])
    second = await compact_session_loops(store, session.id, config=CONFIG)
    (block,) = second.blocks
    assert max(s.range.end_turn for _, s in block.sections()) == 8  # the user's turn
    _check_sections(block, await store.get_messages(session.id))


async def test_a_closed_loop_is_compacted_whole(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    stored = await store.append_messages(session.id, [*_work(6), _open_turn(1)])
    await store.close_loop(session.id, stored[0].loop_id)
    result = await compact_session_loops(store, session.id, config=CONFIG)
    (block,) = result.blocks
    assert max(s.range.end_turn for _, s in block.sections()) == 7


async def test_a_loop_whose_only_turn_is_open_gets_no_block(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    await store.append_messages(session.id, [_open_turn(3), _result("open0"), _result("open1")])
    summarize_all = CompactionConfig(
        keep_first_turns=0, keep_recent_turns=0, block_strategy="default"
    )
    result = await compact_session_loops(store, session.id, config=summarize_all)
    assert result.noop
    assert result.loop_ids
    assert result.feedback is not None


async def test_an_answered_latest_turn_is_compacted_and_compaction_settles(
    store: SessionStore,
) -> None:
    """The live loop's case: every call answered, the next model call not made yet.

    `keep_recent` cuts the latest turn's long output as any other's, so the context falls
    below the threshold and the next `maybe_compact` has nothing to do.
    """
    session = await store.create_session(app_name="app", user_id="u")
    output = "line 12 of the output: ok\n" * 1500
    long_output = ToolResultMessage(tool_call_id="open0", tool_name="read", content=output)
    await store.append_messages(session.id, [*_work(6), _open_turn(1), long_output])
    result = await maybe_compact(store, session.id, max_context_tokens=8_000)
    assert result is not None
    (block,) = result.blocks
    assert block.keep_recent is not None
    assert block.keep_recent.range.end_turn == 7
    _check_sections(block, await store.get_messages(session.id))
    assert result.tokens_after < 4_000
    assert await maybe_compact(store, session.id, max_context_tokens=8_000) is None
    # A result for no waiting call, appended now, joins the covered turn: an orphan, left
    # out of the context as it would be raw.
    (orphan,) = await store.append_messages(session.id, [_result("open0")])
    assert orphan.turn_index == 7
    context = await build_context(store, session.id, max_context_tokens=8_000)
    assert orphan.id not in {c for i in context.items for c in (i.message_id, *i.covers)}
    assert late_orphans(block, await store.get_messages(session.id)) == {orphan.id}
    assert (await store.verify()).is_ok  # an orphan: no result the turn waited for


async def test_write_block_refuses_to_cover_a_turn_waiting_for_a_result(
    store: SessionStore,
) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    stored = await store.append_messages(session.id, [*_work(1), _open_turn(), _result("open0")])
    loop_id = stored[0].loop_id
    summary = UserMessage(content="[Summary] read a file")

    def block(end: int) -> CompactionBlock:
        covers = [m.id for m in stored if 1 <= m.turn_index <= end]
        return CompactionBlock(
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=1, end_turn=end),
                messages=[ReplacementMessage(message=summary, covers=covers)],
            )
        )

    with pytest.raises(InvalidBlockError, match=r"turn 2, the latest of open loop .* 'open1'"):
        await store.write_block(session.id, loop_id, block(2))
    assert await store.get_block(session.id, loop_id) is None  # nothing written
    await store.write_block(session.id, loop_id, block(1))  # the settled turns are fine
    stored += await store.append_messages(session.id, [_result("open1")])
    written = await store.write_block(session.id, loop_id, block(2))  # every call answered
    assert written.generation == 2


async def _set_open_ids(store: SessionStore, loop_id: int, ids: list[str]) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(
            update(loops_table).where(loops_table.c.id == loop_id).values(open_tool_call_ids=ids)
        )


async def test_verify_finds_a_result_that_joined_a_covered_turn(store: SessionStore) -> None:
    """The data an earlier version could leave: a block over the open turn, then a result.

    The loop's open call ids are cleared in the database while the block is written (the
    store would refuse it otherwise), as if the turn were closed, and restored after.
    """
    session = await store.create_session(app_name="app", user_id="u")
    stored = await store.append_messages(session.id, [*_work(1), _open_turn(), _result("open0")])
    loop_id = stored[0].loop_id
    assert (await store.verify()).is_ok
    await _set_open_ids(store, loop_id, [])
    covers = [m.id for m in stored if m.turn_index == 2]
    block = await store.write_block(
        session.id,
        loop_id,
        CompactionBlock(
            keep_first=TurnRange(start_turn=0, end_turn=1),
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=2, end_turn=2),
                messages=[ReplacementMessage(message=UserMessage(content="read"), covers=covers)],
            ),
        ),
    )
    await _set_open_ids(store, loop_id, ["open0", "open1"])
    (late,) = await store.append_messages(session.id, [_result("open1")])
    assert late.turn_index == 2
    context = await build_context(store, session.id, max_context_tokens=100_000)
    assert late.id not in {c for i in context.items for c in (i.message_id, *i.covers)}
    report = await store.verify()
    (problem,) = report.problems
    assert (problem.check, problem.block_id) == ("provenance", block.id)
    assert problem.message_id == late.id
    assert f"message {late.id}, the result of call 'open1', joined turn 2" in problem.detail
    await store.append_messages(session.id, [UserMessage(content="go on")])
    await compact_session_loops(store, session.id, config=CONFIG)
    context = await build_context(store, session.id, max_context_tokens=100_000)
    assert late.id in {c for i in context.items for c in (i.message_id, *i.covers)}
    assert (await store.verify()).is_ok  # the block that missed it is history now
