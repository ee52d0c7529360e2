"""Migration 0016 (a digest stores the loops it folds itself, and the digest it extends)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import inspect, text

from sessionstore import SessionStore, audit_session, build_context, migrate
from tests.conftest import BACKENDS
from tests.integration.test_digest_provenance import (
    ONE_IN_SCOPE,
    _compact,
    _loop,
    compacted_session,
)
from tests.integration.test_migrations import _inspect

BEFORE = "0015_loop_id_key"


def _digests(connection: Any) -> list[tuple[Any, ...]]:
    columns = {c["name"] for c in inspect(connection).get_columns("sessionstore_digests")}
    extends = "extends_id" if "extends_id" in columns else "NULL"
    rows = connection.execute(
        text(
            f"SELECT id, {extends}, CAST(folded AS TEXT), through_loop_id "
            "FROM sessionstore_digests ORDER BY id"
        )
    )
    return [(row[0], row[1], [pair[0] for pair in json.loads(row[2])], row[3]) for row in rows]


async def _state(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    audit = await audit_session(store, session_id)
    context = await build_context(store, session_id, max_context_tokens=2_000)
    digest = await store.get_digest(session_id)
    assert digest is not None
    return (
        audit.digested_loop_ids,
        digest.id,
        digest.through_loop_id,
        context.loop_ids,
        [item.message for item in context.items],
    )


@pytest.mark.parametrize("empty_db_url", BACKENDS, indirect=True)
async def test_0016_downgrade_writes_the_whole_lists_back_and_both_forms_read_alike(
    empty_db_url: str,
) -> None:
    """Down: every digest lists all its loops again (as 0015's code expects). Up again,
    those rows (no `extends_id`) read as before, and a new digest extends one of them."""
    await migrate.upgrade(empty_db_url)
    async with SessionStore.from_url(empty_db_url) as store:
        session_id = await compacted_session(store, 5)
        before = await _state(store, session_id)
    delta = await _inspect(empty_db_url, _digests)
    assert len(delta) >= 3
    assert all(len(folded) == 1 for _, _, folded, _ in delta[1:])

    await migrate.downgrade(empty_db_url, BEFORE)
    whole = await _inspect(empty_db_url, _digests)
    # Each row lists the loops of the rows it extended, then its own.
    assert [row[0] for row in whole] == [row[0] for row in delta]
    running: list[int] = []
    for (_, _, own, _), (_, _, listed, through) in zip(delta, whole, strict=True):
        running += own
        assert listed == running
        assert listed[-1] == through

    await migrate.upgrade(empty_db_url)
    assert await _inspect(empty_db_url, _digests) == whole  # no extends_id: all listed
    async with SessionStore.from_url(empty_db_url) as store:
        assert await _state(store, session_id) == before
        await _loop(store, session_id)
        await _compact(store, session_id, ONE_IN_SCOPE)
        after = await _state(store, session_id)
        assert len(after[0]) == len(before[0]) + 1
        assert after[0][: len(before[0])] == before[0]
    newest = (await _inspect(empty_db_url, _digests))[-1]
    assert newest[1] == before[1]  # it extends the row written before the upgrade
    assert newest[2] == [after[0][-1]]
