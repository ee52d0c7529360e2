"""Full-text search over raw messages and summaries, on every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio

import pytest

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    CompactedSection,
    CompactionBlock,
    ReplacementMessage,
    SessionStore,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    UserMessage,
)
from sessionstore.errors import SessionNotFoundError

HOSTILE = ['"', "AND", "*", "-", "NEAR(", "a OR b", "x:y", "'; DROP TABLE x; --", "(((", "^", "\\"]


async def _session(store: SessionStore, user: str = "ada", app: str = "app") -> str:
    session = await store.create_session(app_name=app, user_id=user)
    return session.id


async def test_a_message_is_found_as_soon_as_it_is_appended(store: SessionStore) -> None:
    sid = await _session(store)
    assert await store.search("penguin") == []
    (stored,) = await store.append_messages(sid, [UserMessage(content="Where do penguins live?")])
    assert await store.search("penguin") == []  # whole words, no stemming
    (hit,) = await store.search("PENGUINS")
    assert (hit.session_id, hit.loop_id, hit.message_id) == (sid, stored.loop_id, stored.id)
    assert (hit.position, hit.turn_index, hit.kind) == (0, 0, "user")
    assert hit.snippet == "Where do **penguins** live?"
    assert hit.score > 0
    assert hit.is_summary is False
    assert hit.created_at == stored.created_at


async def test_every_word_must_match_and_hits_are_ranked(store: SessionStore) -> None:
    sid = await _session(store)
    stored = await store.append_messages(
        sid,
        [
            UserMessage(content="the database migration failed"),
            UserMessage(content="migration " * 5 + "database " * 5 + "and more words " * 3),
            UserMessage(content="a migration, with no mention of the other word"),
        ],
    )
    hits = await store.search("database migration")
    assert [h.message_id for h in hits] == [stored[1].id, stored[0].id]
    assert hits[0].score > hits[1].score
    assert [h.message_id for h in await store.search("migration", limit=2)] == [
        stored[1].id,
        stored[0].id,
    ]


async def test_tool_calls_outputs_and_commands_are_indexed(store: SessionStore) -> None:
    sid = await _session(store)
    stored = await store.append_messages(
        sid,
        [
            UserMessage(content="fix it"),
            AssistantMessage(
                content=[
                    ThinkingContent(thinking="secretthought"),
                    ToolCall(id="c1", name="read_file", arguments={"path": "src/app/main.py"}),
                ]
            ),
            ToolResultMessage(tool_call_id="c1", tool_name="read_file", content="def zebra(): ..."),
            BashExecutionMessage(command="pytest -k quokka", output="1 passed"),
        ],
    )
    assert [h.message_id for h in await store.search("main.py")] == [stored[1].id]
    # Punctuation separates words on both backends: a path's parts are words.
    assert [h.message_id for h in await store.search("main")] == [stored[1].id]
    assert {h.message_id for h in await store.search("read file")} == {stored[1].id, stored[2].id}
    assert [h.message_id for h in await store.search("zebra")] == [stored[2].id]
    assert [h.message_id for h in await store.search("quokka")] == [stored[3].id]
    assert await store.search("secretthought") == []  # thinking is not indexed
    (hit,) = await store.search("zebra")
    assert hit.turn_index == 1
    assert hit.kind == "tool_result"


@pytest.mark.parametrize("query", HOSTILE)
async def test_hostile_queries_are_plain_text_never_a_syntax_error(
    store: SessionStore, query: str
) -> None:
    sid = await _session(store)
    await store.append_messages(sid, [UserMessage(content="a OR b: NEAR and x y")])
    hits = await store.search(query)
    assert all(h.session_id == sid for h in hits)


async def test_quoted_and_operator_words_are_searched_as_words(store: SessionStore) -> None:
    sid = await _session(store)
    (near, other) = await store.append_messages(
        sid, [UserMessage(content="stand NEAR the door"), UserMessage(content="the door")]
    )
    assert [h.message_id for h in await store.search('NEAR("door"')] == [near.id]
    assert [h.message_id for h in await store.search('"door" -near')] == [near.id]
    assert {h.message_id for h in await store.search("door*")} == {near.id, other.id}


async def test_a_blank_query_or_a_bad_limit_is_a_value_error(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="empty"):
        await store.search("   ")
    with pytest.raises(ValueError, match="limit"):
        await store.search("x", limit=0)
    with pytest.raises(ValueError, match="app_name"):
        await store.search("x", user_id="ada")


async def test_search_stays_within_the_tenant(store: SessionStore) -> None:
    ada = await _session(store, "ada")
    bob = await _session(store, "bob")
    other_app = await _session(store, "ada", app="other")
    for sid in (ada, bob, other_app):
        await store.append_messages(sid, [UserMessage(content=f"shared secret of {sid}")])
    as_ada = store.for_tenant("app", "ada")
    assert {h.session_id for h in await as_ada.search("shared secret")} == {ada}
    assert {h.session_id for h in await store.search("shared secret")} == {ada, bob, other_app}
    assert {h.session_id for h in await store.search("secret", app_name="app")} == {ada, bob}
    assert {h.session_id for h in await store.search("secret", app_name="app", user_id="bob")} == {
        bob
    }
    with pytest.raises(SessionNotFoundError):
        await as_ada.search("secret", session_id=bob)


async def test_the_session_filter_and_the_limit(store: SessionStore) -> None:
    one = await _session(store)
    two = await _session(store)
    await store.append_messages(one, [UserMessage(content=f"walrus {i}") for i in range(5)])
    await store.append_messages(two, [UserMessage(content="walrus")])
    assert {h.session_id for h in await store.search("walrus", session_id=two)} == {two}
    assert len(await store.search("walrus", session_id=one, limit=3)) == 3
    assert len(await store.search("walrus")) == 6
    with pytest.raises(SessionNotFoundError):
        await store.search("walrus", session_id="nope")


async def test_deleting_a_session_removes_its_messages_from_search(store: SessionStore) -> None:
    keep = await _session(store)
    gone = await _session(store)
    await store.append_messages(keep, [UserMessage(content="narwhal kept")])
    await store.append_messages(gone, [UserMessage(content="narwhal gone")])
    await store.delete_session(gone)
    hits = await store.search("narwhal")
    assert [h.session_id for h in hits] == [keep]
    # The index holds no stale entry for the deleted rows (SQLite's would raise or mis-rank).
    await store.append_messages(keep, [UserMessage(content="narwhal again")])
    assert len(await store.search("narwhal")) == 2


async def test_summaries_are_searched_only_when_asked_and_only_the_newest(
    store: SessionStore,
) -> None:
    sid = await _session(store)
    stored = await store.append_messages(
        sid,
        [
            UserMessage(content="first request"),
            AssistantMessage(content=[TextContent(text="done one")]),
            UserMessage(content="second request"),
            AssistantMessage(content="done two"),
            UserMessage(content="third request"),
        ],
    )
    loop_id = stored[0].loop_id

    def block(text: str) -> CompactionBlock:
        return CompactionBlock(
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=0, end_turn=1),
                messages=[
                    ReplacementMessage(
                        message=UserMessage(content=text), covers=[m.id for m in stored[:2]]
                    )
                ],
            ),
            keep_recent=CompactedSection(
                range=TurnRange(start_turn=2, end_turn=3),
                messages=[
                    ReplacementMessage(message=m.message, covers=[m.id]) for m in stored[2:4]
                ],
            ),
            strategy="test",
            tokens_before=100,
            tokens_after=10,
        )

    await store.write_block(sid, loop_id, block("[Summary] the user asked about capybaras"))
    newest = await store.write_block(sid, loop_id, block("[Summary] capybaras and otters"))
    assert await store.search("capybaras") == []
    (hit,) = await store.search("capybaras", include_summaries=True)
    assert hit.is_summary
    assert hit.block_id == newest.id
    assert hit.loop_id == loop_id
    assert hit.turn_index is None
    assert hit.covers == [m.id for m in stored[:2]]
    assert "**capybaras**" in hit.snippet
    # Recent-section copies of raw messages are not summaries: no duplicate hits.
    hits = await store.search("second request", include_summaries=True)
    assert [(h.message_id, h.is_summary) for h in hits] == [(stored[2].id, False)]
    assert await store.for_tenant("app", "bob").search("capybaras", include_summaries=True) == []


async def test_concurrent_appends_are_all_indexed(store: SessionStore) -> None:
    sessions = [await _session(store) for _ in range(4)]

    async def write(sid: str) -> None:
        for i in range(5):
            await store.append_messages(sid, [UserMessage(content=f"lemur {sid} {i}")])

    await asyncio.gather(*(write(sid) for sid in sessions))
    hits = await store.search("lemur", limit=100)
    assert len(hits) == 20
    assert {h.session_id for h in hits} == set(sessions)
