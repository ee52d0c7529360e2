"""Non-destructive rewrites of a session's history: a new chain, a new loop, a popped message."""

from __future__ import annotations

import pytest

from sessionstore import (
    AssistantMessage,
    ConflictError,
    Message,
    SessionStore,
    StaleWriteError,
    StoredMessage,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.config import FixedCount


async def texts(store: SessionStore, session_id: str) -> list[str]:
    return await texts_of(await store.get_history(session_id))


async def texts_of(stored: list[StoredMessage]) -> list[str]:
    return [getattr(m.message, "text", m.message.kind) for m in stored]


async def test_a_root_loop_starts_the_history_over_and_keeps_the_old_chain(
    store: SessionStore,
) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, [UserMessage(content="one")])
    old = (await store.get_session(session.id)).active_loop_id
    loop = await store.start_loop(session.id, is_root=True, messages=[UserMessage(content="two")])
    assert loop.parent_loop_id is None
    assert loop.message_count == 1
    assert await texts(store, session.id) == ["two"]
    assert [m.message.text for m in await store.get_history(session.id, loop_id=old)] == ["one"]  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="root"):
        await store.start_loop(session.id, is_root=True, parent_loop_id=old)


async def test_a_failed_root_start_writes_nothing(store: SessionStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, [UserMessage(content="one")])
    with pytest.raises(StaleWriteError):
        await store.start_loop(
            session.id, is_root=True, messages=[UserMessage(content="x")], expected_version=0
        )
    assert await texts(store, session.id) == ["one"]
    assert len(await store.list_loops(session.id)) == 1


async def test_a_root_start_refuses_a_stored_client_id(store: SessionStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, [UserMessage(content="one", client_id="k")])
    for messages in (
        [UserMessage(content="two", client_id="k")],
        [UserMessage(content="a", client_id="j"), UserMessage(content="b", client_id="j")],
    ):
        with pytest.raises(ConflictError, match="client_id"):
            await store.start_loop(session.id, is_root=True, messages=messages)
    assert len(await store.list_loops(session.id)) == 1


async def test_appending_to_a_new_loop_reuses_an_empty_active_loop(store: SessionStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, [UserMessage(content="one")], loop_id="new")
    await store.append_messages(session.id, [UserMessage(content="two")], loop_id="new")
    loops = await store.list_loops(session.id)
    assert [loop.message_count for loop in loops] == [1, 1]
    assert loops[1].parent_loop_id == loops[0].id
    await store.start_loop(session.id, is_root=True)
    await store.append_messages(session.id, [UserMessage(content="three")], loop_id="new")
    assert [loop.message_count for loop in await store.list_loops(session.id)] == [1, 1, 1]
    assert await texts(store, session.id) == ["three"]
    with pytest.raises(ValueError, match="loop_id"):
        await store.append_messages(session.id, [UserMessage(content="x")], loop_id="old")  # type: ignore[arg-type]


async def test_a_started_loop_is_returned_and_continued_as_stored(store: SessionStore) -> None:
    """start_loop builds its record from what it wrote; an append to a loop it started
    in the same transaction continues from the empty loop's state."""
    session = await store.create_session(app_name="a", user_id="u")
    root = await store.start_loop(session.id)
    child = await store.start_loop(session.id)
    stored = await store.list_loops(session.id)
    assert stored == [root.model_copy(update={"closed_at": stored[0].closed_at}), child]
    assert stored[0].closed_at is not None
    call = ToolCall(id="c1", name="read", arguments="{}")
    first = await store.append_messages(
        session.id, [UserMessage(content="one"), AssistantMessage(content=[call])], loop_id="new"
    )
    later = await store.append_messages(
        session.id, [ToolResultMessage(tool_call_id="c1", content="data")]
    )
    loops = await store.list_loops(session.id)
    assert len(loops) == 2
    assert loops[1].closed_at is None  # empty and open: the "new" append went to it
    assert [m.loop_id for m in first + later] == [child.id] * 3
    assert [(m.position, m.turn_index) for m in first + later] == [(0, 0), (1, 1), (2, 1)]
    assert (loops[1].depth, loops[1].message_count, loops[1].turn_count) == (1, 3, 2)
    third = await store.append_messages(session.id, [UserMessage(content="two")], loop_id="new")
    loops = await store.list_loops(session.id)
    assert (loops[2].id, loops[2].parent_loop_id, loops[2].depth) == (third[0].loop_id, child.id, 2)
    assert loops[1].closed_at is not None
    assert (await store.get_session(session.id)).active_loop_id == loops[2].id


async def test_pop_message_branches_without_deleting(store: SessionStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    assert await store.pop_message(session.id) is None
    call = ToolCall(id="c1", name="read", arguments="{}")
    await store.append_messages(
        session.id,
        [
            UserMessage(content="read it", client_id="u1"),
            AssistantMessage(content=[call]),
            ToolResultMessage(tool_call_id="c1", tool_name="read", content="data"),
        ],
    )
    first = (await store.get_session(session.id)).active_loop_id
    popped = await store.pop_message(session.id)
    assert popped is not None
    assert popped.message.kind == "tool_result"
    assert await texts(store, session.id) == ["read it", ""]
    replacement = AssistantMessage(content="changed my mind")
    popped = await store.pop_message(session.id, replacement=replacement)
    assert popped is not None
    assert popped.message.kind == "assistant"
    assert await texts(store, session.id) == ["read it", "changed my mind"]
    # The copies dropped their client ids; the original loop is whole.
    assert [m.message.client_id for m in await store.get_history(session.id)] == [None, None]
    original = await store.get_history(session.id, loop_id=first)
    assert [m.message.kind for m in original] == ["user", "assistant", "tool_result"]
    assert original[0].message.client_id == "u1"
    # Popping down to nothing, then past it.
    await store.pop_message(session.id)
    await store.pop_message(session.id)
    assert await store.get_history(session.id) == []
    assert await store.pop_message(session.id) is None


async def test_pop_message_checks_the_version(store: SessionStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, [UserMessage(content="one")])
    with pytest.raises(StaleWriteError):
        await store.pop_message(session.id, expected_version=0)
    assert await texts(store, session.id) == ["one"]


async def test_the_newest_messages_of_a_chain(store: SessionStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    for loop in range(4):
        await store.append_messages(
            session.id, [UserMessage(content=f"{loop}.{n}") for n in range(3)], loop_id="new"
        )
    everything = await texts(store, session.id)
    assert len(everything) == 12
    for last in range(14):
        newest = await texts_of(await store.get_history(session.id, last=last))
        assert newest == everything[max(0, len(everything) - last) :]  # all 12 past 12
    with pytest.raises(ValueError, match="last"):
        await store.get_history(session.id, last=-1)


async def _chain(store: SessionStore, session_id: str, prompt: str, *, root: bool) -> None:
    """A chain of five loops whose first opens with the system prompt `prompt`."""
    first: list[Message] = [
        SystemMessage(content=prompt),
        UserMessage(content=f"{prompt}: the task"),
    ]
    if root:
        await store.start_loop(session_id, is_root=True, messages=first)
    else:
        await store.append_messages(session_id, first)
    for n in range(4):
        await store.start_loop(session_id, messages=[UserMessage(content=f"{prompt}: step {n}")])


@pytest.mark.parametrize("roots", [1, 2])
async def test_the_system_prompt_comes_from_the_first_loop_of_the_active_chain(
    store: SessionStore, roots: int
) -> None:
    """One root is found by one probe; with several, the chain's own root still wins."""
    session = await store.create_session(app_name="a", user_id="u")
    await _chain(store, session.id, "prompt A", root=False)
    if roots == 2:
        await _chain(store, session.id, "prompt B", root=True)
    sources = await store.read_context(session.id, budget=100_000, scope=FixedCount(count=1))
    expected = "prompt A" if roots == 1 else "prompt B"
    assert [m.message.text for m in sources.system] == [expected]  # type: ignore[union-attr]
    assert all(loop.loop.parent_loop_id is not None for loop in sources.loops)
