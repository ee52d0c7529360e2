"""Every bounded column of the schema has a limit the models or the store check first.

A new `String(n)` or 32-bit `Integer` column fails this test until it is added here with
the limit that guards it (see `sessionstore.models._limits`), so no backend can refuse
what another accepts (issue 10, defect 8).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String

from sessionstore.models import (
    APP_NAME_MAX_LENGTH,
    CLIENT_ID_MAX_LENGTH,
    MAX_INT,
    OVERLAY_MAX_LENGTH,
    SESSION_ID_MAX_LENGTH,
    STRATEGY_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    TOOL_ID_MAX_LENGTH,
    TOOL_NAME_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
)
from sessionstore.store._tables import metadata

CHECKED_TEXT = {
    "session_id": SESSION_ID_MAX_LENGTH,
    "sessionstore_sessions.id": SESSION_ID_MAX_LENGTH,
    "sessionstore_sessions.app_name": APP_NAME_MAX_LENGTH,
    "sessionstore_sessions.user_id": USER_ID_MAX_LENGTH,
    "sessionstore_sessions.title": TITLE_MAX_LENGTH,
    "sessionstore_messages.tool_call_id": TOOL_ID_MAX_LENGTH,
    "sessionstore_messages.tool_name": TOOL_NAME_MAX_LENGTH,
    "sessionstore_messages.client_id": CLIENT_ID_MAX_LENGTH,
    "sessionstore_blocks.overlay": OVERLAY_MAX_LENGTH,
    "sessionstore_digests.overlay": OVERLAY_MAX_LENGTH,
    "sessionstore_blocks.strategy": STRATEGY_MAX_LENGTH,
}
"""Text columns written from input, and the limit checked before they are written."""

WRITTEN_BY_THE_STORE = {
    "sessionstore_messages.kind",  # a message class's literal `kind`
    "sessionstore_section_messages.kind",
    "sessionstore_messages.content_hash",  # a SHA-256 hex digest
    "sessionstore_block_sections.kind",  # "compacted" or "recent"
    "sessionstore_compaction_events.event",  # "started" or "ended" (check_event_kind)
}
"""Text columns only the store writes, from a fixed set of values."""

CHECKED_INT32 = {
    "sessionstore_messages.token_count",  # the counter's answer: check_count in prepare
    "sessionstore_section_messages.token_count",  # ReplacementMessage.token_count / counter
    "sessionstore_digests.token_count",  # SessionDigest.token_count
    "sessionstore_blocks.keep_first_start",  # TurnRange: Count
    "sessionstore_blocks.keep_first_end",
    "sessionstore_block_sections.start_turn",
    "sessionstore_block_sections.end_turn",
    "sessionstore_blocks.generation",  # looked up: check_count(generation, as_of)
    "sessionstore_usage.turn_index",  # record_usage: check_count, then a turn of the loop
}
"""32-bit columns whose values come from input, checked against `MAX_INT`."""

COUNTED_BY_THE_STORE = {
    "sessionstore_sessions.version",
    "sessionstore_sessions.loop_count",
    "sessionstore_loops.sequence",
    "sessionstore_loops.depth",
    "sessionstore_loops.message_count",
    "sessionstore_loops.turn_count",
    "sessionstore_messages.position",
    "sessionstore_messages.turn_index",
    "sessionstore_section_messages.position",
}
"""32-bit counters the store keeps itself (a session would need 2^31 writes to overflow)."""


def _columns() -> list[tuple[str, object]]:
    return [
        (f"{table.name}.{column.name}", column.type)
        for table in metadata.sorted_tables
        for column in table.columns
    ]


def test_every_bounded_text_column_has_a_checked_limit() -> None:
    for name, kind in _columns():
        if not isinstance(kind, String) or kind.length is None:
            continue
        if name in WRITTEN_BY_THE_STORE:
            continue
        limit = CHECKED_TEXT.get(name, CHECKED_TEXT.get(name.split(".")[1]))
        assert limit == kind.length, f"{name} is String({kind.length}) with no limit checked"


def test_every_32_bit_column_is_checked_or_counted_by_the_store() -> None:
    int32 = {
        name
        for name, kind in _columns()
        if isinstance(kind, Integer) and not isinstance(kind, BigInteger)
    }
    assert int32 == CHECKED_INT32 | COUNTED_BY_THE_STORE
    assert MAX_INT == 2**31 - 1
