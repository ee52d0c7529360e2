"""SQLite's search index is brought up to date by the search (migration 0009), never stale.

Appends do not feed the FTS5 index; a search indexes what was appended since the index's
highest id first. These tests check the index against its content table with FTS5's own
`integrity-check` after deletes of indexed and of not-yet-indexed rows, and that a
read-only store (which cannot write the index) still finds every committed message.
"""

from __future__ import annotations

from pathlib import Path

from sessionstore import SessionStore, UserMessage, migrate

FTS = "sessionstore_messages_fts"


async def _integrity_check(store: SessionStore) -> None:
    async with store.engine.begin() as connection:
        await connection.exec_driver_sql(f"INSERT INTO {FTS}({FTS}) VALUES ('integrity-check')")


async def _indexed_rows(store: SessionStore) -> int:
    async with store.engine.connect() as connection:
        result = await connection.exec_driver_sql(f"SELECT count(*) FROM {FTS}_docsize")
        return int(result.scalar_one())


async def _store(tmp_path: Path) -> SessionStore:
    url = f"sqlite+aiosqlite:///{tmp_path / 'search.db'}"
    await migrate.upgrade(url)
    return SessionStore.from_url(url)


async def test_an_append_leaves_the_index_to_the_next_search(tmp_path: Path) -> None:
    async with await _store(tmp_path) as store:
        session = await store.create_session(app_name="app", user_id="ada")
        await store.append_messages(session.id, [UserMessage(content="walrus one")])
        assert await _indexed_rows(store) == 0
        assert [h.snippet for h in await store.search("walrus")] == ["**walrus** one"]
        assert await _indexed_rows(store) == 1
        batch = [UserMessage(content=f"walrus {i}") for i in range(3)]
        await store.append_messages(session.id, batch)
        assert len(await store.search("walrus")) == 4
        assert await _indexed_rows(store) == 4
        await _integrity_check(store)


async def test_deleting_indexed_and_pending_rows_keeps_the_index_whole(tmp_path: Path) -> None:
    async with await _store(tmp_path) as store:
        indexed = await store.create_session(app_name="app", user_id="ada")
        pending = await store.create_session(app_name="app", user_id="bob")
        kept = await store.create_session(app_name="app", user_id="cy")
        await store.append_messages(indexed.id, [UserMessage(content="otter indexed")])
        await store.append_messages(kept.id, [UserMessage(content="otter kept")])
        assert len(await store.search("otter")) == 2  # both indexed now
        await store.append_messages(pending.id, [UserMessage(content="otter pending")])
        await store.append_messages(kept.id, [UserMessage(content="otter later")])
        # One session's rows are in the index, the other's are not yet: delete both.
        await store.delete_session(indexed.id)
        await store.delete_session(pending.id)
        await _integrity_check(store)
        hits = await store.search("otter")
        assert sorted(h.snippet for h in hits) == ["**otter** kept", "**otter** later"]
        await _integrity_check(store)
        # The newest indexed row deleted: the rows after it are still indexed exactly once.
        await store.append_messages(kept.id, [UserMessage(content="otter newest")])
        assert len(await store.search("otter")) == 3
        await _integrity_check(store)


async def test_a_read_only_store_finds_messages_not_indexed_yet(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    async with await _store(tmp_path) as writer:
        session = await writer.create_session(app_name="app", user_id="ada")
        await writer.append_messages(session.id, [UserMessage(content="heron first words")])
        assert len(await writer.search("heron")) == 1
        await writer.append_messages(
            session.id,
            [UserMessage(content="Heron, second"), UserMessage(content="no bird here")],
        )
    read_only = f"sqlite+aiosqlite:///file:{path}?mode=ro&uri=true"
    async with SessionStore.from_url(read_only) as reader:
        hits = await reader.search("heron")
        assert sorted(h.snippet for h in hits) == ["**Heron**, second", "**heron** first words"]
        assert [h.loop_number for h in hits] == [1, 1]  # the one loop, numbered as indexed hits are
        assert [h.snippet for h in await reader.search("heron second")] == ["**Heron**, **second**"]
        assert await reader.search("bird heron") == []
        other = await reader.search("heron", app_name="other")
        assert other == []
    async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as writer:
        assert await _indexed_rows(writer) == 1  # the reader wrote nothing
        assert len(await writer.search("heron")) == 2
        await _integrity_check(writer)
