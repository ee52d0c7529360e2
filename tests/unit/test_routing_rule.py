"""The statement-routing rule of `tests/routing.py` (the PostgreSQL suite applies it to every
statement the store sends): a statement binds the session key, or is a documented fan-out."""

from __future__ import annotations

import pytest

from tests.routing import FAN_OUT, fan_out_call, routed, violations

KEYED = [
    "SELECT sessionstore_loops.id FROM sessionstore_loops WHERE sessionstore_loops.id = $1"
    "::BIGINT AND sessionstore_loops.session_id = $2::VARCHAR",
    "UPDATE sessionstore_sessions SET version=$1 WHERE sessionstore_sessions.id = $2::VARCHAR",
    "INSERT INTO sessionstore_messages (session_id, app_name, user_id) VALUES ($1, $2, $3)",
    "INSERT INTO sessionstore_sessions (id, app_name, user_id) VALUES ($1, $2, $3)",
]
UNKEYED = [
    "SELECT sessionstore_loops.id FROM sessionstore_loops WHERE sessionstore_loops.id = $1",
    "DELETE FROM sessionstore_messages WHERE sessionstore_messages.loop_id = $1",
    "UPDATE sessionstore_sessions SET title=$1 WHERE sessionstore_sessions.app_name = $2",
]


@pytest.mark.parametrize("statement", KEYED)
def test_a_statement_that_binds_the_key_is_routed(statement: str) -> None:
    assert routed(statement)
    assert violations({statement}) == []


@pytest.mark.parametrize("statement", UNKEYED)
def test_a_statement_without_the_key_is_a_violation(statement: str) -> None:
    assert not routed(statement)
    assert fan_out_call(statement) is None
    assert violations({statement}) == [statement]


def test_the_fan_out_calls_are_the_documented_ones() -> None:
    assert list(FAN_OUT) == ["list_sessions", "search across sessions", "purge", "verify"]
    listing = (
        "SELECT sessionstore_sessions.id FROM sessionstore_sessions ORDER BY "
        "sessionstore_sessions.created_at DESC, sessionstore_sessions.id DESC LIMIT $1"
    )
    assert fan_out_call(listing) == "list_sessions"
