"""Units of work on provider usage: per model call, summed per turn, loop and session.

The usage an appended assistant message carries is read from its payload (migration 0011:
no second row for it); `record_usage` writes a usage row. A session's totals add both.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Connection, func, literal_column, select

from sessionstore._usage_read import HALF, USAGE_FIELDS
from sessionstore._usage_read import session_usage as read_usage
from sessionstore.errors import NotFoundError
from sessionstore.models import AssistantMessage, Message, SessionUsage, Usage, UsageRecord
from sessionstore.models._limits import MAX_BIG_INT, check_big_count
from sessionstore.store import _statements as sql
from sessionstore.store._sessions import SessionKey, loop_row
from sessionstore.store._source import StoreSource

__all__ = [
    "USAGE_FIELDS",
    "check_message_usage",
    "insert_usage",
    "message_usage",
    "recorded_usage",
    "session_usage",
]


def _row(
    key: SessionKey,
    loop_id: int,
    turn_index: int,
    message_id: int | None,
    model: str | None,
    usage: Usage,
    moment: datetime,
) -> dict[str, Any]:
    counts = {name: getattr(usage, name) for name in USAGE_FIELDS}
    for name, count in counts.items():  # also a Usage built with model_construct
        check_big_count(count, f"usage.{name}")
    return {
        **key.columns,
        "loop_id": loop_id,
        "turn_index": turn_index,
        "message_id": message_id,
        "model": model,
        **counts,
        "created_at": moment,
    }


def check_message_usage(messages: Iterable[Message]) -> None:
    """Refuse an assistant message whose usage no usage sum can hold (built unvalidated).

    Its usage is summed from its payload (migration 0011), so the store checks the
    counts a usage row would have held.
    """
    for message in messages:
        if isinstance(message, AssistantMessage) and message.usage is not None:
            counts = message.usage.__dict__
            for name in USAGE_FIELDS:
                count = counts[name]
                if type(count) is not int or not 0 <= count <= MAX_BIG_INT:  # else: the error
                    check_big_count(count, f"usage.{name}")


def insert_usage(
    db: Connection,
    key: SessionKey,
    loop_id: int | None,
    turn_index: int | None,
    usage: Usage,
    model: str | None,
    moment: datetime,
) -> UsageRecord:
    """Record one model call's usage on a turn of a loop (default: the loop's last turn)."""
    if loop_id is None:
        raise NotFoundError(f"session {key.session_id!r} has no loop to record usage on")
    loop = loop_row(db, key, loop_id)
    turn = loop.turn_count - 1 if turn_index is None else turn_index
    if not 0 <= turn < loop.turn_count:
        raise NotFoundError(
            f"loop {loop_id} has no turn {turn} (it has {loop.turn_count}): "
            "record usage after appending the messages of the call"
        )
    row = _row(key, loop_id, turn, None, model, usage, moment)
    new_id = db.execute(sql.insert_returning_id(sql.usage, False), row).scalar_one()
    return UsageRecord(
        id=new_id,
        session_id=key.session_id,
        loop_id=loop_id,
        turn_index=turn,
        message_id=None,
        model=model,
        usage=usage,
        created_at=moment,
    )


def _split_sums(column: Any) -> tuple[Any, Any]:
    """The sums of a count's high and low 32 bits: each fits in 64 bits for 2**31 rows.

    SQLite's SUM of 64-bit integers raises "integer overflow" past 2**63 - 1, where
    PostgreSQL's returns a `numeric`; summing the halves gives every backend the exact total.
    """
    return func.sum(column // HALF), func.sum(column % HALF)


def _payload_count(dialect: str, name: str) -> Any:
    """A message payload's `usage.<name>` as an integer (0 when absent)."""
    if dialect == "postgresql":
        value = f"CAST(sessionstore_messages.payload -> 'usage' ->> '{name}' AS BIGINT)"
    else:
        value = f"json_extract(sessionstore_messages.payload, '$.usage.{name}')"
    return func.coalesce(literal_column(value, BigInteger), 0)


def recorded_usage() -> Any:
    """The usage rows `record_usage` wrote for a session, summed per loop and turn."""
    columns = sql.usage.c
    return (
        select(
            columns.loop_id,
            columns.turn_index,
            func.count(),
            *(half for name in USAGE_FIELDS for half in _split_sums(columns[name])),
        )
        .where(*sql.keyed(sql.usage))
        .group_by(columns.loop_id, columns.turn_index)
    )


def message_usage(dialect: str) -> Any:
    """The usage of a session's appended assistant messages, per loop and turn.

    Read through the loops of the session, so each loop's messages come from its turn
    index (`ix_sessionstore_messages_turn`). The payload's JSON is read as `dialect`
    reads it.
    """
    messages, loops = sql.messages, sql.loops
    # The cast: `json` since 0014, and a `jsonb` payload (a schema not upgraded yet) reads alike.
    has_usage = (
        "json_typeof(CAST(sessionstore_messages.payload -> 'usage' AS JSON)) = 'object'"
        if dialect == "postgresql"
        else "json_type(sessionstore_messages.payload, '$.usage') = 'object'"
    )
    session_loops = select(loops.c.id).where(*sql.keyed(loops))
    return (
        select(
            messages.c.loop_id,
            messages.c.turn_index,
            func.count(),
            *(half for name in USAGE_FIELDS for half in _split_sums(_payload_count(dialect, name))),
        )
        .where(
            messages.c.loop_id.in_(session_loops),
            *sql.keyed(messages),
            messages.c.kind == "assistant",
            literal_column(has_usage),
        )
        .group_by(messages.c.loop_id, messages.c.turn_index)
    )


def session_usage(db: Connection, key: SessionKey) -> SessionUsage:
    """Return a session's usage per turn and loop, with its total (`_usage_read`)."""
    return read_usage(StoreSource(db), key)
