"""`RecordCache`: builds of one session take again the raw messages the last build decoded.

On SQLite and PostgreSQL. A build with the cache is the build without it; only the records
whose rows read back the same, column for column, are taken again; a new or changed row
(a message appended since, a session deleted and written again under the same id, whose
rows may get the same ids on SQLite) is decoded.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    BuiltContext,
    Message,
    RecordCache,
    SessionStore,
    TextContent,
    UserMessage,
    build_context,
    compact_session_loops,
    migrate,
)
from tests.integration._helpers import SMALL, check_valid, session_with_loops

WINDOW = 1_000_000


def _same(a: BuiltContext, b: BuiltContext) -> None:
    assert [(i.source, i.message_id, i.loop_id, i.tokens) for i in a.items] == [
        (i.source, i.message_id, i.loop_id, i.tokens) for i in b.items
    ]
    assert a.messages == b.messages
    assert a.tokens == b.tokens


def _raw(context: BuiltContext) -> dict[int, Message]:
    return {i.message_id: i.message for i in context.items if i.message_id is not None}


async def test_a_build_with_a_cache_is_the_build_without_it_and_decodes_once(
    store: SessionStore,
) -> None:
    session_id = await session_with_loops(store)
    await compact_session_loops(store, session_id, config=SMALL)  # blocks: raw turns read apart
    cache = RecordCache()
    first = await build_context(store, session_id, max_context_tokens=WINDOW, records=cache)
    plain = await build_context(store, session_id, max_context_tokens=WINDOW)
    _same(first, plain)
    check_valid(first)
    assert {i.source for i in first.items} >= {"raw", "compacted"}
    assert len(cache) >= len(_raw(first)) > 0
    again = await build_context(store, session_id, max_context_tokens=WINDOW, records=cache)
    _same(again, plain)
    # The raw messages are the records the first build decoded, not decoded again.
    before, after = _raw(first), _raw(again)
    assert before.keys() == after.keys()
    assert all(after[key] is before[key] for key in before)
    # Without the cache, every build decodes its own.
    assert all(_raw(plain)[key] is not before[key] for key in before)


async def test_messages_appended_since_are_decoded_and_the_rest_taken_again(
    store: SessionStore,
) -> None:
    session_id = await session_with_loops(store, loops=2, turns=3)
    cache = RecordCache()
    first = await build_context(store, session_id, max_context_tokens=WINDOW, records=cache)
    extra: list[Message] = [UserMessage(content="and then?"), AssistantMessage(content="done")]
    await store.append_messages(session_id, extra)
    later = await build_context(store, session_id, max_context_tokens=WINDOW, records=cache)
    _same(later, await build_context(store, session_id, max_context_tokens=WINDOW))
    assert later.messages[-2:] == extra
    before, after = _raw(first), _raw(later)
    assert all(after[key] is before[key] for key in before)
    assert len(after) == len(before) + 2
    # The cache holds what the last build read, no more.
    assert len(cache) == len(after)


async def test_a_session_written_again_under_its_id_is_read_anew(store: SessionStore) -> None:
    # Deleted and written again, the session's rows may take the same ids (SQLite gives a
    # new row the highest id plus one): the other columns differ, so nothing is taken again.
    session = await store.create_session(app_name="app", user_id="u", session_id="again")
    await store.append_messages(session.id, [UserMessage(content="old"), _answer("old answer")])
    cache = RecordCache()
    first = await build_context(store, session.id, max_context_tokens=WINDOW, records=cache)
    await store.delete_session(session.id)
    await store.create_session(app_name="app", user_id="u", session_id="again")
    await store.append_messages(session.id, [UserMessage(content="new"), _answer("new answer")])
    later = await build_context(store, session.id, max_context_tokens=WINDOW, records=cache)
    assert [m.text for m in later.messages] == ["new", "new answer"]  # type: ignore[union-attr]  # user and assistant messages
    _same(later, await build_context(store, session.id, max_context_tokens=WINDOW))
    assert _raw(first)
    assert not any(m is n for m in later.messages for n in first.messages)


async def test_a_cache_shared_by_two_databases_takes_nothing_of_one_for_the_other(
    tmp_path: Path,
) -> None:
    # Two new databases number their messages alike: the same ids, other rows.
    cache = RecordCache()
    built = []
    for name in ("a", "b"):
        url = f"sqlite+aiosqlite:///{tmp_path / name}.db"
        await migrate.upgrade(url)
        async with SessionStore.from_url(url) as store:
            session = await store.create_session(app_name="app", user_id="u", session_id="s")
            await store.append_messages(session.id, [UserMessage(content=f"ask {name}")])
            built.append(await build_context(store, "s", max_context_tokens=WINDOW, records=cache))
    assert _raw(built[0]).keys() == _raw(built[1]).keys()
    assert [m.text for m in built[1].messages] == ["ask b"]  # type: ignore[union-attr]  # user messages


async def test_a_cache_keeps_the_last_records_it_was_given_up_to_its_limit(
    store: SessionStore,
) -> None:
    session = await store.create_session(app_name="app", user_id="u")
    for n in range(5):
        await store.append_messages(session.id, [UserMessage(content=f"ask {n}"), _answer("ok")])
    for limit, reused in ((3, 3), (0, 0), (10_000, 10)):
        cache = RecordCache(max_records=limit)
        first = _raw(
            await build_context(store, session.id, max_context_tokens=WINDOW, records=cache)
        )
        assert len(cache) == reused
        again = _raw(
            await build_context(store, session.id, max_context_tokens=WINDOW, records=cache)
        )
        same = [key for key in first if again[key] is first[key]]
        assert same == sorted(first)[len(first) - reused :]  # the newest
    with pytest.raises(ValueError, match="max_records"):
        RecordCache(max_records=-1)


async def _build(store: SessionStore, session_id: str, cache: RecordCache) -> BuiltContext:
    return await build_context(store, session_id, max_context_tokens=WINDOW, records=cache)


def _answer(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=text)])


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.sampled_from(["append", "loop", "compact", "build", "recreate"]),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=200, max_value=5_000),
)
async def test_any_history_builds_the_same_with_or_without_a_cache(
    store: SessionStore, steps: list[str], window: int
) -> None:
    session_id = f"prop-{uuid.uuid4().hex}"
    await store.create_session(app_name="app", user_id="u", session_id=session_id)
    cache = RecordCache()
    count = 0
    for step in [*steps, "build"]:
        if step == "append":
            count += 1
            await store.append_messages(
                session_id, [UserMessage(content=f"ask {count}"), _answer(f"answer {count}")]
            )
        elif step == "loop" and count:
            await store.start_loop(session_id)
        elif step == "compact" and count:
            await compact_session_loops(store, session_id, config=SMALL)
        elif step == "recreate":
            await store.delete_session(session_id)
            await store.create_session(app_name="app", user_id="u", session_id=session_id)
            count = 0
        elif step == "build" and count:
            cached = await build_context(
                store, session_id, max_context_tokens=window, records=cache
            )
            _same(cached, await build_context(store, session_id, max_context_tokens=window))
            check_valid(cached)
    await store.delete_session(session_id)
