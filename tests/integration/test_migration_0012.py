"""Migration 0012 (PostgreSQL: the raw messages' search vector written by the append)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

from sessionstore import SessionStore, ToolResultMessage, UserMessage, migrate
from sessionstore.store._engine import make_engine
from tests.conftest import BACKENDS
from tests.integration.test_migrations import _diff, _dump, _fill_every_table, _inspect

BEFORE = "0011_compact_messages"
POSTGRES = [param for param in BACKENDS if param.id == "postgres"]


def _search_columns(connection: Any) -> tuple[dict[str, Any], list[tuple[int, str]]]:
    """The messages' search columns (name -> whether generated) and every row's vector."""
    columns = {
        str(c["name"]): c.get("computed") is not None
        for c in inspect(connection).get_columns("sessionstore_messages")
        if str(c["name"]).startswith("search_")
    }
    vectors = [
        (row[0], row[1])
        for row in connection.execute(
            text("SELECT id, CAST(search_vector AS TEXT) FROM sessionstore_messages ORDER BY id")
        )
    ]
    return columns, vectors


async def _hits(store: SessionStore, *queries: str) -> dict[str, list[tuple[int, float]]]:
    return {q: [(h.message_id, h.score) for h in await store.search(q)] for q in queries}


QUERIES = ("okapi", "3e4x", "école", "привет", "wombat", "filler")


@pytest.mark.parametrize("empty_db_url", POSTGRES, indirect=True)
async def test_0012_keeps_every_vector_and_search_across_the_upgrade_and_back(
    empty_db_url: str,
) -> None:
    """Rows stored at 0011 (generated vectors) keep their vectors and their hits and scores
    at 0012, where new rows are found at once; downgrading generates them again, equal."""
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        session_id = await _fill_every_table(store)
        await store.create_session(session_id="s", app_name="app", user_id="u")
        written = await store.append_messages(
            "s",
            [
                UserMessage(content="the okapi grazes, 3e4x times"),
                UserMessage(content="Die ÉCOLE"),
                ToolResultMessage(tool_call_id="c", tool_name="grep", content="Привет, мир"),
                UserMessage(content="wombat wombat okapi"),
                *(UserMessage(content=f"filler {i}") for i in range(600)),  # several batches
            ],
        )
        hits = await _hits(store, *QUERIES)
        assert [m for m, _ in hits["okapi"]] == [written[0].id, written[3].id]
        columns, vectors = await _inspect(empty_db_url, _search_columns)
        assert columns == {"search_vector": False}

        # At 0011 the vector is generated from `search_text`, filled from the payloads.
        await migrate.downgrade(empty_db_url, BEFORE)
        at_0011 = await _inspect(empty_db_url, _dump)
        columns, generated = await _inspect(empty_db_url, _search_columns)
        assert columns == {"search_text": False, "search_vector": True}
        assert generated == vectors  # the append wrote what 0011 generates

        await migrate.upgrade(empty_db_url)
        assert await migrate.current(empty_db_url) == migrate.head()
        assert await _inspect(empty_db_url, _diff) == []
        assert await _inspect(empty_db_url, _dump) == at_0011
        assert await _inspect(empty_db_url, _search_columns) == (
            {"search_vector": False},
            vectors,
        )
        assert await _hits(store, *QUERIES) == hits
        (late,) = await store.append_messages("s", [UserMessage(content="a late okapi")])
        assert late.id in [h.message_id for h in await store.search("okapi")]
        assert (await store.verify()).is_ok
        engine = make_engine(empty_db_url)
        try:
            with pytest.raises(DBAPIError, match="immutable"):
                async with engine.begin() as conn:
                    await conn.execute(
                        text(
                            "UPDATE sessionstore_messages SET search_vector = NULL "
                            f"WHERE id = {late.id}"
                        )
                    )
        finally:
            await engine.dispose()

        await migrate.downgrade(empty_db_url, BEFORE)
        assert await migrate.current(empty_db_url) == BEFORE
        _, again = await _inspect(empty_db_url, _search_columns)
        assert again[:-1] == vectors
        await migrate.upgrade(empty_db_url)
        after = await _hits(store, *QUERIES)
        assert [m for m, _ in after.pop("okapi")] == [written[0].id, written[3].id, late.id]
        assert after == {q: found for q, found in hits.items() if q != "okapi"}
        await store.delete_session(session_id)
