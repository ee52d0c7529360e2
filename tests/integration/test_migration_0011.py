"""Migration 0011 (binary content hashes, usage kept in the payloads, shorter SQLite keys)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

from sessionstore import AssistantMessage, SessionStore, Usage, UserMessage, migrate
from sessionstore.store._engine import make_engine
from tests.integration.test_migrations import _diff, _dump, _fill_every_table, _inspect

BEFORE = "0010_lean_messages"


def _usage_rows(connection: Any) -> list[tuple[Any, ...]]:
    """The usage rows without their ids (a downgrade writes the messages' rows anew)."""
    return [
        tuple(row)
        for row in connection.execute(
            text(
                "SELECT session_id, loop_id, turn_index, message_id, model, input_tokens, "
                "output_tokens, created_at FROM sessionstore_usage "
                "ORDER BY session_id, loop_id, turn_index, message_id"
            )
        )
    ]


def _hash_and_keys(connection: Any) -> tuple[Any, list[str], list[list[str]]]:
    """A stored content hash, the messages' unique keys and the usage table's foreign keys."""
    stored = connection.execute(
        text("SELECT content_hash FROM sessionstore_messages ORDER BY id LIMIT 1")
    ).scalar_one()
    inspector = inspect(connection)
    keys = sorted(str(u["name"]) for u in inspector.get_unique_constraints("sessionstore_messages"))
    fks = [fk["referred_table"] for fk in inspector.get_foreign_keys("sessionstore_usage")]
    return stored, keys, fks


async def test_0011_compacts_a_0010_database_with_its_data_and_back(empty_db_url: str) -> None:
    """0010 -> 0011 -> 0010 with rows in every table: hashes stay verifiable, usage totals,
    search, client ids and the immutability triggers survive both ways."""
    is_sqlite = empty_db_url.startswith("sqlite")
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        session_id = await _fill_every_table(store)
        await store.create_session(session_id="lean", app_name="app", user_id="u")
        first = await store.append_messages(
            "lean",
            [
                UserMessage(content="the okapi grazes here", client_id="c1"),
                AssistantMessage(
                    content="seen", model="m", usage=Usage(input_tokens=5, output_tokens=2)
                ),
            ],
        )
        await store.record_usage("lean", Usage(output_tokens=3), model="late")
        await store.search("okapi")  # the index holds these rows; the next one is pending
        pending = await store.append_messages("lean", [UserMessage(content="a quokka waits")])
        usage = await store.usage("lean")
        assert usage.usage == Usage(input_tokens=5, output_tokens=5)
        assert usage.calls == 2
        totals = await store.usage(session_id)
        messages = await store.get_messages("lean")

        await migrate.downgrade(empty_db_url, BEFORE)
        at_0010 = await _inspect(empty_db_url, _dump)
        usage_rows = await _inspect(empty_db_url, _usage_rows)
        # 0010 holds a usage row for the message (0006's data step) and the recorded one.
        assert {row[3] for row in usage_rows if row[0] == "lean"} == {None, first[1].id}
        stored, keys, fks = await _inspect(empty_db_url, _hash_and_keys)
        assert isinstance(stored, str)
        assert len(stored) == 64
        assert "sessionstore_messages" in fks

        await migrate.upgrade(empty_db_url)
        assert await migrate.current(empty_db_url) == migrate.head()
        assert await _inspect(empty_db_url, _diff) == []
        assert await _inspect(empty_db_url, _dump) == at_0010  # hashes compared as hex
        stored, keys, fks = await _inspect(empty_db_url, _hash_and_keys)
        assert isinstance(stored, bytes)
        assert len(stored) == 32
        assert "sessionstore_messages" not in fks
        if is_sqlite:
            assert "uq_sessionstore_messages_sqlite_key" not in keys
        rows = await _inspect(empty_db_url, _usage_rows)
        assert [row[3] for row in rows if row[0] == "lean"] == [None]  # only record_usage's
        assert await store.usage("lean") == usage
        assert await store.usage(session_id) == totals
        assert await store.get_messages("lean") == messages
        assert [h.message_id for h in await store.search("okapi")] == [first[0].id]
        assert [h.message_id for h in await store.search("quokka")] == [pending[0].id]
        again = await store.append_messages(
            "lean", [UserMessage(content="the okapi grazes here", client_id="c1")]
        )
        assert [m.id for m in again] == [first[0].id]
        assert (await store.verify()).is_ok
        engine = make_engine(empty_db_url)
        try:
            with pytest.raises(DBAPIError, match="immutable"):
                async with engine.begin() as conn:
                    await conn.execute(
                        text(
                            f"UPDATE sessionstore_messages SET kind = 'x' WHERE id = {first[0].id}"
                        )
                    )
        finally:
            await engine.dispose()

        await migrate.downgrade(empty_db_url, BEFORE)
        assert await _inspect(empty_db_url, _dump) == at_0010
        assert await _inspect(empty_db_url, _usage_rows) == usage_rows
        await migrate.upgrade(empty_db_url)
        assert await store.usage("lean") == usage
        assert (await store.verify()).is_ok
        await store.delete_session("lean")
        assert await store.search("okapi") == []
