"""Units of work on provider usage: one row per model call, summed per turn, loop and session."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select

from sessionstore.errors import NotFoundError
from sessionstore.models import (
    AssistantMessage,
    LoopUsage,
    SessionUsage,
    StoredMessage,
    TurnUsage,
    Usage,
    UsageRecord,
)
from sessionstore.models._limits import STORED, check_big_count
from sessionstore.store import _statements as sql
from sessionstore.store._engine import insert_plain
from sessionstore.store._sessions import SessionKey, bound_time, loop_row

__all__ = ["USAGE_FIELDS", "insert_message_usage", "insert_usage", "session_usage"]

USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
"""The token counts of `Usage`, which are also the usage table's columns."""


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


def insert_message_usage(db: Connection, key: SessionKey, stored: Sequence[StoredMessage]) -> None:
    """Record the usage carried by freshly stored assistant messages, one row per message."""
    if db.dialect.name == "sqlite":
        _insert_message_usage_sqlite(db, key, stored)
        return
    rows = [
        _row(key, s.loop_id, s.turn_index, s.id, m.model, m.usage, s.created_at)
        for s in stored
        if isinstance(m := s.message, AssistantMessage) and m.usage is not None
    ]
    if rows:
        db.execute(insert(sql.usage), rows)


def _insert_message_usage_sqlite(
    db: Connection, key: SessionKey, stored: Sequence[StoredMessage]
) -> None:
    """SQLite: bind-ready tuples straight on the driver (see `insert_plain`), no dicts.

    The time is one value for the whole batch (the append's), processed once.
    """
    values: list[tuple[Any, ...]] = []
    created: Any = None
    session_id, app_name, user_id = key.session_id, key.app_name, key.user_id
    for s in stored:
        message = s.message
        if not isinstance(message, AssistantMessage) or message.usage is None:
            continue
        usage = message.usage
        counts = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
        )
        for name, count in zip(USAGE_FIELDS, counts, strict=True):  # also model_construct
            check_big_count(count, f"usage.{name}")
        if created is None:
            created = bound_time(db, s.created_at)
        values.append(
            (
                session_id,
                app_name,
                user_id,
                s.loop_id,
                s.turn_index,
                s.id,
                message.model,
                *counts,
                created,
            )
        )
    if values:
        insert_plain(db, sql.usage, _USAGE_COLUMNS, values)


_USAGE_COLUMNS = (
    "session_id",
    "app_name",
    "user_id",
    "loop_id",
    "turn_index",
    "message_id",
    "model",
    *USAGE_FIELDS,
    "created_at",
)


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


_HALF = 2**32


def _split_sums(column: Any) -> tuple[Any, Any]:
    """The sums of a count's high and low 32 bits: each fits in 64 bits for 2**31 rows.

    SQLite's SUM of 64-bit integers raises "integer overflow" past 2**63 - 1, where
    PostgreSQL's returns a `numeric`; summing the halves gives every backend the exact total.
    """
    return func.sum(column // _HALF), func.sum(column % _HALF)


def session_usage(db: Connection, key: SessionKey) -> SessionUsage:
    """Return a session's usage per turn and loop, with its total."""
    columns = sql.usage.c
    stmt = (
        select(
            columns.loop_id,
            columns.turn_index,
            func.count(),
            *(half for name in USAGE_FIELDS for half in _split_sums(columns[name])),
        )
        .where(*sql.keyed(sql.usage))
        .group_by(columns.loop_id, columns.turn_index)
        .order_by(columns.loop_id, columns.turn_index)
    )
    turns_by_loop: dict[int, list[TurnUsage]] = {}
    for loop_id, turn_index, calls, *halves in db.execute(stmt, key.params).all():
        totals = [
            int(h) * _HALF + int(low) for h, low in zip(halves[::2], halves[1::2], strict=True)
        ]
        # A total may pass the limit of one call's count: it is read, not stored.
        usage = Usage.model_validate(dict(zip(USAGE_FIELDS, totals, strict=True)), context=STORED)
        turns_by_loop.setdefault(loop_id, []).append(
            TurnUsage(turn_index=turn_index, calls=calls, usage=usage)
        )
    loops = [
        LoopUsage(
            loop_id=loop_id,
            calls=sum(t.calls for t in turns),
            usage=sum((t.usage for t in turns), Usage()),
            turns=turns,
        )
        for loop_id, turns in turns_by_loop.items()
    ]
    return SessionUsage(
        session_id=key.session_id,
        calls=sum(loop.calls for loop in loops),
        usage=sum((loop.usage for loop in loops), Usage()),
        loops=loops,
    )
