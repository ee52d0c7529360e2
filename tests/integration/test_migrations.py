"""Migrations: upgrade an empty database, compare with the ORM metadata, downgrade, upgrade."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from sessionstore import (
    AssistantMessage,
    CompactedSection,
    CompactionBlock,
    CompactionConfig,
    FixedCount,
    Message,
    ReplacementMessage,
    SessionStore,
    TurnRange,
    Usage,
    UserMessage,
    build_context,
    compact_session_loops,
    make_engine,
    migrate,
)
from sessionstore.errors import SchemaError
from sessionstore.store._schema import scanned_head
from sessionstore.store._tables import include_object, schema_metadata
from tests.integration._helpers import session_with_loops

ROOT = Path(__file__).resolve().parents[2]


async def _inspect(url: str, fn: Any) -> Any:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(fn)
    finally:
        await engine.dispose()


def _diff(connection: Any) -> list[Any]:
    context = MigrationContext.configure(
        connection,
        opts={
            "compare_type": True,
            "version_table": migrate.VERSION_TABLE,
            "include_object": include_object,
        },
    )
    return list(compare_metadata(context, schema_metadata()))


HEAD = "0017_loop_parent_key"


def _tables(connection: Any) -> set[str]:
    return set(inspect(connection).get_table_names())


async def test_upgrade_matches_metadata_and_downgrade_cleans_up(empty_db_url: str) -> None:
    url = empty_db_url
    assert await migrate.current(url) is None
    with pytest.raises(SchemaError, match="not initialised"):
        await migrate.check(url)
    await migrate.upgrade(url)
    assert await migrate.current(url) == migrate.head() == HEAD
    assert await migrate.check(url) == HEAD
    assert await _inspect(url, _diff) == []
    tables = await _inspect(url, _tables)
    assert {t.name for t in schema_metadata().sorted_tables} <= tables
    await migrate.downgrade(url, "base")
    assert await _inspect(url, _tables) <= {migrate.VERSION_TABLE}
    assert await migrate.current(url) is None
    await migrate.upgrade(url)
    assert await _inspect(url, _diff) == []
    assert await migrate.check(url) == HEAD


async def test_downgrade_to_0001_and_back_keeps_rows_and_the_user_index(
    empty_db_url: str,
) -> None:
    # Rows are written by the store at head (it writes every column of the head schema),
    # then the schema goes down to 0001 and up again around them.
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        await store.create_session(session_id="s1", app_name="app", user_id="u")
        await store.append_messages("s1", [UserMessage(content="hello")])

        def user_indexes(connection: Any) -> list[str]:
            found = inspect(connection).get_indexes("sessionstore_messages")
            return [ix["name"] for ix in found if ix["name"] == "ix_sessionstore_messages_user"]

        await migrate.downgrade(empty_db_url, "0001_initial")
        assert await _inspect(empty_db_url, user_indexes) == []
        with pytest.raises(SchemaError):
            await store.check_schema()
        await migrate.upgrade(empty_db_url)
        assert await _inspect(empty_db_url, user_indexes) == ["ix_sessionstore_messages_user"]
        (stored,) = await store.get_messages("s1")
        assert isinstance(stored.message, UserMessage)
        assert stored.message.text == "hello"
        assert [hit.message_id for hit in await store.search("hello")] == [stored.id]


async def test_upgrade_twice_is_a_no_op(empty_db_url: str) -> None:
    await migrate.upgrade(empty_db_url)
    await migrate.upgrade(empty_db_url)
    assert await migrate.current(empty_db_url) == migrate.head()


def test_the_head_read_without_alembic_is_alembics_head() -> None:
    assert scanned_head(ROOT / "migrations" / "versions") == migrate.head() == HEAD


def _script(directory: Path, revision: str, down: str) -> None:
    (directory / f"{revision}.py").write_text(
        f'revision: str = "{revision}"\ndown_revision: str | None = {down}\n'
    )


def test_the_head_scan_gives_up_on_what_is_not_a_plain_chain(tmp_path: Path) -> None:
    _script(tmp_path, "a", "None")
    _script(tmp_path, "b", '"a"')
    assert scanned_head(tmp_path) == "b"
    _script(tmp_path, "c", '"a"')  # a branch: two heads
    assert scanned_head(tmp_path) is None
    _script(tmp_path, "d", '("b", "c")')  # a merge, which the scan does not read
    assert scanned_head(tmp_path) is None


async def test_check_names_the_revision_of_a_database_behind_the_head(empty_db_url: str) -> None:
    await migrate.upgrade(empty_db_url, "0007_delete_paths")

    with pytest.raises(SchemaError, match=r"at revision 0007_delete_paths.*db upgrade"):
        await migrate.check(empty_db_url)


async def test_migrate_accepts_an_engine(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        await migrate.upgrade(engine)
        assert await migrate.check(engine) == migrate.head()
    finally:
        await engine.dispose()


def test_alembic_upgrade_head_works_from_a_checkout(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'checkout.db'}"
    env = {**os.environ, "SESSIONSTORE_URL": url}
    alembic = [sys.executable, "-m", "alembic", "-c", str(ROOT / "alembic.ini")]
    result = subprocess.run(
        [*alembic, "upgrade", "head"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    check = subprocess.run(
        [*alembic, "current"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert f"{HEAD} (head)" in check.stdout


@pytest.mark.slow
def test_the_wheel_ships_the_migrations(tmp_path: Path) -> None:
    """`sessionstore db upgrade` after `pip install` needs the scripts inside the package."""
    import zipfile

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("sessionstore-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    versions = {p.name for p in (ROOT / "migrations" / "versions").glob("*.py")}
    assert {f"sessionstore/_migrations/versions/{v}" for v in versions} <= names
    assert {"sessionstore/_migrations/env.py", "sessionstore/py.typed"} <= names


TABLES = (
    "sessionstore_sessions",
    "sessionstore_loops",
    "sessionstore_messages",
    "sessionstore_blocks",
    "sessionstore_block_sections",
    "sessionstore_section_messages",
    "sessionstore_compaction_events",
    "sessionstore_digests",
)


LATER_COLUMNS = {"search_text", "search_vector", "extends_id"}
"""Columns a later migration adds (0005, 0016) and fills again on upgrade: compared apart
(0016's in `test_migration_0016.py`)."""

TENANT_COLUMNS = {"app_name", "user_id"}
"""Columns 0008 adds to every table but the sessions (the session's key): compared apart."""


def _dump(connection: Any, *, keys: bool = False) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, without the columns later revisions add (but with `keys`)."""
    present = _tables(connection)
    dump = {}
    for table in TABLES:
        if table not in present:
            continue
        left_out = LATER_COLUMNS
        if not keys and table != "sessionstore_sessions":
            left_out = LATER_COLUMNS | TENANT_COLUMNS
        columns = [
            c["name"] for c in inspect(connection).get_columns(table) if c["name"] not in left_out
        ]
        listed = ", ".join(columns)
        rows = connection.execute(text(f"SELECT {listed} FROM {table} ORDER BY id")).all()
        # A content hash is its bytes since 0011 and hex before: compared as hex.
        dump[table] = [tuple(v.hex() if isinstance(v, bytes) else v for v in row) for row in rows]
    return dump


async def _fill_every_table(store: SessionStore) -> str:
    session_id = await session_with_loops(store, loops=4, turns=6)
    config = CompactionConfig(
        keep_first_turns=1,
        keep_recent_turns=2,
        max_summary_tokens=300,
        compaction_scope=FixedCount(1),
    )
    await compact_session_loops(store, session_id, config=config, max_context_tokens=400)
    await store.record_compaction_event(
        session_id, event="started", tokens_before=10, details={"nul": "a\x00b"}
    )
    return session_id


async def test_upgrade_downgrade_upgrade_keeps_the_data(empty_db_url: str) -> None:
    """Up, down and up again with rows in every table, on both backends.

    The downgrades that are defined to keep data do: 0004 (the immutability triggers go)
    and 0002 (an index goes) keep every row; 0003 drops the digests, as its header says.
    """
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        session_id = await _fill_every_table(store)
        full = await _inspect(empty_db_url, _dump)
        assert all(full[table] for table in TABLES), {t: len(r) for t, r in full.items()}
        messages = await store.get_messages(session_id)
        context = await build_context(store, session_id, max_context_tokens=400)

        await migrate.downgrade(empty_db_url, "0003_session_digests")
        assert await _inspect(empty_db_url, _dump) == full
        await migrate.downgrade(empty_db_url, "0001_initial")
        kept = await _inspect(empty_db_url, _dump)
        assert "sessionstore_digests" not in kept
        assert kept == {t: rows for t, rows in full.items() if t != "sessionstore_digests"}

        await migrate.upgrade(empty_db_url)
        assert await migrate.check(empty_db_url) == HEAD
        assert await _inspect(empty_db_url, _diff) == []
        after = await _inspect(empty_db_url, _dump)
        assert after == {**full, "sessionstore_digests": []}
        assert await store.get_messages(session_id) == messages
        again = await build_context(store, session_id, max_context_tokens=400)
        assert again.loop_ids == context.loop_ids
        assert (await store.verify()).is_ok
        # The triggers are back: one message cannot be deleted, the session can.
        engine = make_engine(empty_db_url)
        try:
            with pytest.raises(DBAPIError, match="immutable"):
                async with engine.begin() as conn:
                    await conn.execute(
                        text(f"DELETE FROM sessionstore_messages WHERE id = {messages[0].id}")
                    )
        finally:
            await engine.dispose()
        await store.delete_session(session_id)


async def test_downgrading_0004_lets_one_message_be_deleted_again(empty_db_url: str) -> None:
    """The downgrade is real: without 0004's triggers a DELETE of one message goes through."""
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        session = await store.create_session(app_name="a", user_id="u")
        stored = await store.append_messages(session.id, [UserMessage(content="x")] * 2)
        await migrate.downgrade(empty_db_url, "0003_session_digests")
        engine = make_engine(empty_db_url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    text(f"DELETE FROM sessionstore_messages WHERE id = {stored[0].id}")
                )
        finally:
            await engine.dispose()
        await migrate.upgrade(empty_db_url)
        report = await store.verify()
        assert {p.check for p in report.problems} >= {"positions", "counters"}


async def test_search_and_usage_are_backfilled_from_rows_stored_before_them(
    empty_db_url: str,
) -> None:
    """0005 fills the search text of existing rows, 0006 the usage of existing messages."""
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        await store.create_session(session_id="s1", app_name="app", user_id="u")
        messages: list[Message] = [
            UserMessage(content="find the platypus"),
            AssistantMessage(
                content="found it", model="m1", usage=Usage(input_tokens=7, output_tokens=3)
            ),
        ]
        messages += [UserMessage(content=f"filler {i}") for i in range(600)]  # several batches
        stored = await store.append_messages("s1", messages)
        await store.write_block(
            "s1",
            stored[0].loop_id,
            CompactionBlock(
                keep_compacted=CompactedSection(
                    range=TurnRange(start_turn=0, end_turn=1),
                    messages=[
                        ReplacementMessage(
                            message=UserMessage(content="[Summary] a platypus was found"),
                            covers=[stored[0].id, stored[1].id],
                        )
                    ],
                ),
                strategy="test",
                tokens_before=100,
                tokens_after=10,
            ),
        )
        await migrate.downgrade(empty_db_url, "0003_session_digests")
        await migrate.upgrade(empty_db_url)
        hits = await store.search("platypus", include_summaries=True)
        assert sorted((h.is_summary, h.message_id) for h in hits)[0] == (False, stored[0].id)
        assert [h.is_summary for h in hits].count(True) == 1
        assert len(await store.search("filler", limit=1000)) == 600
        usage = await store.usage("s1")
        assert usage.usage == Usage(input_tokens=7, output_tokens=3)
        assert usage.loops[0].turns[0].turn_index == stored[1].turn_index
        if empty_db_url.startswith("sqlite"):

            def integrity(connection: Any) -> None:
                for table in ("sessionstore_messages_fts", "sessionstore_section_messages_fts"):
                    connection.exec_driver_sql(
                        f"INSERT INTO {table}({table}) VALUES ('integrity-check')"
                    )

            await _inspect(empty_db_url, integrity)
        # The immutability triggers set aside for the backfill are back.
        with pytest.raises(IntegrityError, match="immutable"):
            await _inspect(
                empty_db_url,
                lambda c: c.exec_driver_sql(
                    "UPDATE sessionstore_messages SET kind = 'x' WHERE id = 1"
                ),
            )


def _delete_path_objects(connection: Any) -> tuple[set[str], set[str]]:
    """The indexes on referencing columns and the loop-detaching trigger (migration 0007)."""
    inspector = inspect(connection)
    indexes = {
        ix["name"]
        for table in inspector.get_table_names()
        for ix in inspector.get_indexes(table)
        if ix["name"].startswith("ix_")
        and ix["name"].endswith(("_loop_id", "_block_id", "_section_id", "_message_id"))
    }
    if connection.dialect.name == "postgresql":
        found = "SELECT tgname FROM pg_trigger WHERE tgname LIKE 'sessionstore_sessions_%'"
    else:
        found = (
            "SELECT name FROM sqlite_master "
            "WHERE type = 'trigger' AND tbl_name = 'sessionstore_sessions'"
        )
    triggers = {row[0] for row in connection.execute(text(found))}
    return indexes, triggers


@pytest.mark.slow_on_postgres  # deep chains, down and up: half a minute on PostgreSQL
async def test_0007_goes_down_and_up_with_rows_and_deletes_deep_chains_only_when_up(
    empty_db_url: str,
) -> None:
    """0007 adds indexes and a trigger, no column: down and up keep every row, and the
    deep-chain delete (issue 17, item 1) works at 0007 on both backends."""
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        session_id = await _fill_every_table(store)
        full = await _inspect(empty_db_url, _dump)
        indexes, triggers = await _inspect(empty_db_url, _delete_path_objects)
        assert len(indexes) == 7  # 0010 drops three that other indexes cover, 0017 one
        is_sqlite = empty_db_url.startswith("sqlite")
        assert triggers == ({"sessionstore_sessions_detach_loops"} if is_sqlite else set())

        await migrate.downgrade(empty_db_url, "0006_usage")
        assert await _inspect(empty_db_url, _delete_path_objects) == (set(), set())
        assert await _inspect(empty_db_url, _dump) == full
        await migrate.upgrade(empty_db_url)
        assert await _inspect(empty_db_url, _delete_path_objects) == (indexes, triggers)
        assert await _inspect(empty_db_url, _dump) == full
        assert await _inspect(empty_db_url, _diff) == []
        assert (await store.verify()).is_ok

        deep = await store.import_session(
            [[UserMessage(content=f"loop {i}")] for i in range(1_100)], app_name="a", user_id="u"
        )
        await store.delete_session(deep.id)
        await store.delete_session(session_id)
        assert await _inspect(empty_db_url, _dump) == {table: [] for table in TABLES}


def _shape(connection: Any) -> dict[str, Any]:
    """Every table's columns, keys, foreign keys and indexes, as the database reports them."""
    found = inspect(connection)
    shape: dict[str, Any] = {}
    for table in TABLES:
        shape[table] = {
            "columns": sorted(
                (c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(table)
            ),
            "pk": found.get_pk_constraint(table)["constrained_columns"],
            "unique": sorted(
                (u["name"], tuple(u["column_names"])) for u in found.get_unique_constraints(table)
            ),
            "fks": sorted(
                (
                    fk["name"],
                    tuple(fk["constrained_columns"]),
                    fk["referred_table"],
                    tuple(fk["referred_columns"]),
                    fk["options"].get("ondelete"),
                )
                for fk in found.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in found.get_indexes(table)
            ),
        }
    return shape


def _triggers(connection: Any) -> list[tuple[str, str]]:
    if connection.dialect.name == "sqlite":
        query = "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
    else:
        query = (
            "SELECT tgname, tgrelid::regclass::text FROM pg_trigger "
            "WHERE NOT tgisinternal ORDER BY tgname"
        )
    return [tuple(row) for row in connection.exec_driver_sql(query).all()]


async def _every_read(store: SessionStore, session_id: str) -> dict[str, Any]:
    """What each read of the store returns for a session (models compare by value)."""
    loops = await store.list_loops(session_id)
    blocks = [await store.block_history(session_id, loop.id) for loop in loops]
    replacements = [
        m.id
        for loop_blocks in blocks
        for b in loop_blocks
        for _, s in b.sections()
        for m in s.messages
        if m.id is not None
    ]
    history = await store.get_history(session_id)
    return {
        "session": await store.get_session(session_id),
        "loops": loops,
        "loop": [await store.get_loop(session_id, loop.id) for loop in loops],
        "chains": [await store.active_chain(session_id, loop_id=loop.id) for loop in loops],
        "history": history,
        "tail": await store.get_history(session_id, last=3),
        "pages": [m async for chunk in store.iter_history(session_id, chunk_size=4) for m in chunk],
        "by_id": await store.get_messages_by_id(session_id, [m.id for m in history]),
        "messages": [await store.get_messages(session_id, loop_id=loop.id) for loop in loops],
        "newest": await store.get_messages(session_id, last=2),
        "turn_maps": [await store.get_turn_map(session_id, loop.id) for loop in loops],
        "turns": [
            await store.get_turns(session_id, loop.id, TurnRange(start_turn=0, end_turn=0))
            for loop in loops
            if loop.turn_count
        ],
        "blocks": blocks,
        "block": [await store.get_block(session_id, loop.id) for loop in loops],
        "replacements": [await store.get_replacement_message(session_id, i) for i in replacements],
        "chain_blocks": await store.chain_blocks(session_id),
        "views": [
            (view.loop, list(view.messages), view.turn_map, view.previous)
            for view in [await store.get_loop_view(session_id, loop) for loop in loops]
        ],
        "digest": await store.get_digest(session_id),
        "events": await store.list_compaction_events(session_id),
        "usage": await store.usage(session_id),
        "search": await store.search(
            "turn", session_id=session_id, include_summaries=True, limit=1000
        ),
        "context": (await build_context(store, session_id, max_context_tokens=400)).messages,
    }


async def test_0008_moves_a_0007_database_with_its_data_and_back(empty_db_url: str) -> None:
    """Session keys (0008) move every row of a 0007 database, and every read stays the same.

    The 0007 database is made by downgrading one filled at the head (a release's store
    cannot run on this one's tables); its shape is checked against a database made at 0007.
    """
    await migrate.upgrade(empty_db_url, "0007_delete_paths")
    shape_0007 = await _inspect(empty_db_url, _shape)
    triggers_0007 = await _inspect(empty_db_url, _triggers)
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        first = await _fill_every_table(store)
        loops = await store.list_loops(first)
        await store.start_loop(first, parent_loop_id=loops[1].id)  # a branch
        await store.append_messages(
            first,
            [
                UserMessage(content="the branch's turn"),
                AssistantMessage(content="ok", model="m", usage=Usage(input_tokens=5)),
            ],
        )
        await store.record_usage(first, Usage(output_tokens=2), model="m")
        await store.switch_loop(first, loops[-1].id)
        second = await store.for_tenant("other", "bob").import_session(
            [[UserMessage(content="bob's turn")], [UserMessage(content="a second turn")]],
            session_id="bobs",
        )
        sessions = [first, second.id]
        reads = {sid: await _every_read(store, sid) for sid in sessions}
        full = await _inspect(empty_db_url, lambda c: _dump(c, keys=True))
        plain = await _inspect(empty_db_url, _dump)
        head_triggers = await _inspect(empty_db_url, _triggers)
        assert all(full[table] for table in TABLES), {t: len(r) for t, r in full.items()}

        await migrate.downgrade(empty_db_url, "0007_delete_paths")
        assert await migrate.current(empty_db_url) == "0007_delete_paths"
        assert await _inspect(empty_db_url, _dump) == plain
        # The same tables and triggers as the database had when it was made at 0007.
        assert await _inspect(empty_db_url, _shape) == shape_0007
        assert await _inspect(empty_db_url, _triggers) == triggers_0007

        await migrate.upgrade(empty_db_url)
        assert await _inspect(empty_db_url, _diff) == []
        assert await _inspect(empty_db_url, lambda c: _dump(c, keys=True)) == full
        assert await _inspect(empty_db_url, _triggers) == head_triggers
        for sid in sessions:
            assert await _every_read(store, sid) == reads[sid], sid
        assert (await store.verify()).is_ok
        # Writes go on, and ids keep growing past the ones moved.
        more = await store.append_messages(first, [UserMessage(content="after the move")])
        assert more[0].id > max(m.id for m in reads[first]["history"])
        # The immutability triggers hold, by the new keys.
        with pytest.raises(IntegrityError, match="immutable"):
            await _inspect(
                empty_db_url,
                lambda c: c.exec_driver_sql(
                    f"DELETE FROM sessionstore_messages WHERE id = {more[0].id}"
                ),
            )
        # Ids are per tenant now; going back below 0008 is refused while one is shared.
        await store.for_tenant("third", "eve").create_session(session_id="bobs")
        with pytest.raises(SchemaError, match="'bobs' is used by more than one tenant"):
            await migrate.downgrade(empty_db_url, "0007_delete_paths")
        assert await migrate.current(empty_db_url) == HEAD
        await store.for_tenant("third", "eve").delete_session("bobs")
        await store.delete_session(first)
        assert await store.get_history("bobs") == reads["bobs"]["history"]


async def test_0010_leans_a_0009_database_with_its_search_index_and_back(
    empty_db_url: str,
) -> None:
    """0010 rebuilds the SQLite messages (no search text) and trims indexes on both backends:
    rows, ids, client ids, usage and the search index (indexed and pending rows) survive
    both ways, and a deleted session leaves the index consistent."""
    is_sqlite = empty_db_url.startswith("sqlite")
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        session_id = await _fill_every_table(store)
        await store.create_session(session_id="lean", app_name="app", user_id="u")
        first = await store.append_messages(
            "lean",
            [
                UserMessage(content="the okapi_grazes here", client_id="c1"),
                AssistantMessage(
                    content="seen", model="m", usage=Usage(input_tokens=5, output_tokens=2)
                ),
            ],
        )
        # A search indexes the rows written so far; the next one stays pending (0009). Both
        # are written at the head: the store writes the head's rows (0011's hashes, usage).
        await store.search("okapi")
        pending = await store.append_messages(
            "lean", [UserMessage(content="a quokka waits", client_id="c2")]
        )
        await migrate.downgrade(empty_db_url, "0009_deferred_search_index")
        full = await _inspect(empty_db_url, _dump)

        await migrate.upgrade(empty_db_url)
        assert await _inspect(empty_db_url, _diff) == []
        assert await _inspect(empty_db_url, _dump) == full
        assert [h.message_id for h in await store.search("okapi")] == [first[0].id]
        assert [h.message_id for h in await store.search("grazes")] == [first[0].id]
        assert [h.message_id for h in await store.search("quokka")] == [pending[0].id]
        # Idempotent client ids keep working on the partial unique index.
        again = await store.append_messages(
            "lean", [UserMessage(content="the okapi_grazes here", client_id="c1")]
        )
        assert [m.id for m in again] == [first[0].id]
        assert (await store.usage("lean")).usage == Usage(input_tokens=5, output_tokens=2)
        assert (await store.verify()).is_ok

        def integrity(connection: Any) -> None:
            table = "sessionstore_messages_fts"
            connection.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")

        await store.delete_session(session_id)  # its rows leave the index (the view's text)
        if is_sqlite:
            await _inspect(empty_db_url, integrity)
        kept = await _inspect(empty_db_url, _dump)

        await migrate.downgrade(empty_db_url, "0009_deferred_search_index")
        assert await _inspect(empty_db_url, _dump) == kept
        if is_sqlite:
            await _inspect(empty_db_url, integrity)
            await _inspect(empty_db_url, _index_at_0009)
            await _inspect(empty_db_url, integrity)
        await migrate.upgrade(empty_db_url)
        assert [h.message_id for h in await store.search("quokka")] == [pending[0].id]
        assert [h.message_id for h in await store.search("okapi")] == [first[0].id]
        await store.delete_session("lean")
        if is_sqlite:
            await _inspect(empty_db_url, integrity)
        assert await store.search("okapi") == []


def _index_at_0009(connection: Any) -> None:
    """SQLite at 0009: index the rows after the index's highest id from `search_text`."""
    fts = "sessionstore_messages_fts"
    connection.exec_driver_sql(
        f"INSERT INTO {fts}(rowid, search_text) SELECT id, search_text "
        f"FROM sessionstore_messages WHERE id > (SELECT coalesce(max(id), 0) FROM {fts}_docsize)"
    )
