"""Migration 0014 (PostgreSQL: the raw messages' payload is `json`, its text, not `jsonb`)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from sessionstore import AssistantMessage, SessionStore, ToolResultMessage, UserMessage, migrate
from sessionstore.models import Message, Usage
from tests.conftest import BACKENDS
from tests.integration.test_migrations import _diff, _dump, _fill_every_table, _inspect

BEFORE = "0013_message_replace_keys"


def _payload_type(connection: Any) -> str:
    if connection.dialect.name != "postgresql":
        query = "SELECT type FROM pragma_table_info('sessionstore_messages') WHERE name = 'payload'"
    else:
        query = (
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_name = 'sessionstore_messages' AND column_name = 'payload'"
        )
    return str(connection.execute(text(query)).scalar_one())


HOSTILE: list[Message] = [
    UserMessage(content="a NUL \x00 and the escape \U0010ffff, école, привет, 😀"),
    AssistantMessage(
        content="floats",
        extra={"big": 1e300, "tiny": 5e-324, "negative zero": -0.0, "exact": 1e16},
        usage=Usage(input_tokens=2**40, output_tokens=7),
    ),
    ToolResultMessage(tool_call_id="c", tool_name="sh", content='{"json": "inside"} \\u0000'),
]


async def _state(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    messages = await store.get_messages(session_id)
    return (
        [(m.id, m.content_hash, m.message) for m in messages],
        await store.usage(session_id),
        [h.message_id for h in await store.search("inside")],
        (await store.verify()).problems,
    )


@pytest.mark.parametrize("empty_db_url", BACKENDS, indirect=True)
async def test_0014_keeps_every_payload_across_the_upgrade_and_back(empty_db_url: str) -> None:
    """Payloads written as `jsonb` read back equal as `json`, their hashes verify, usage
    sums the same and search finds the same; downgrading gives the same rows. SQLite: no-op.
    (Every other PostgreSQL test writes and reads `json` payloads at the head.)"""
    postgres = not empty_db_url.startswith("sqlite")
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        await _fill_every_table(store)  # by this code, at the head: then back to 0013
    await migrate.downgrade(empty_db_url, BEFORE)
    async with SessionStore.from_url(empty_db_url) as store:
        await store.create_session(session_id="h", app_name="app", user_id="u")
        await store.append_messages("h", HOSTILE)
        before = await _state(store, "h")
    rows = await _inspect(empty_db_url, _dump)
    assert await _inspect(empty_db_url, _payload_type) == ("jsonb" if postgres else "JSON")

    await migrate.upgrade(empty_db_url)
    assert await _inspect(empty_db_url, _payload_type) == ("json" if postgres else "JSON")
    assert await _inspect(empty_db_url, _diff) == []
    async with SessionStore.from_url(empty_db_url) as store:
        assert await _state(store, "h") == before
        assert [m for _, _, m in before[0]] == HOSTILE
        assert before[3] == []  # every stored hash verifies
    await migrate.downgrade(empty_db_url, BEFORE)
    assert await _inspect(empty_db_url, _payload_type) == ("jsonb" if postgres else "JSON")
    assert await _inspect(empty_db_url, _dump) == rows
    async with SessionStore.from_url(empty_db_url) as store:
        assert await _state(store, "h") == before
