"""Units of work on raw messages: append (with idempotent client ids) and plain reads.

Raw messages are append-only: nothing here updates or deletes one, and the database
refuses an UPDATE of a message row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, select

from sessionstore._tokens import TokenCounter
from sessionstore._turns import TurnAssigner, TurnMap
from sessionstore.errors import ConflictError, InvalidBlockError, LoopNotFoundError
from sessionstore.models import (
    MESSAGE_ADAPTER,
    Message,
    StoredMessage,
    ToolResultMessage,
    TurnRange,
    content_hash,
    message_payload,
)
from sessionstore.store import _statements as sql
from sessionstore.store._sessions import loop_row
from sessionstore.store._tables import stored_model, stored_models

__all__ = [
    "Prepared",
    "by_id",
    "insert_messages",
    "insert_returning_ids",
    "known_client_ids",
    "prepare",
    "turn_map",
    "turns",
    "validated",
]


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a message row needs, computed before the transaction opens."""

    message: Message
    payload: dict[str, Any]
    digest: str
    token_count: int


def validated(message: Any) -> Message:
    """Return `message` as a model of the message union; dicts are validated into one."""
    if isinstance(message, Mapping):
        return MESSAGE_ADAPTER.validate_python(message)
    if not hasattr(message, "kind") or not hasattr(message, "client_id"):
        raise TypeError(f"not a message: {type(message).__name__}")
    return message  # type: ignore[no-any-return]  # a model of the Message union


def prepare(message: Message, counter: TokenCounter) -> Prepared:
    """Serialise, hash and count a message once."""
    payload = message_payload(message)
    return Prepared(message, payload, content_hash(payload), counter.count_message(message))


def insert_returning_ids(
    db: Connection, table: Table, rows: Sequence[Mapping[str, Any]]
) -> list[int]:
    """Insert rows of one table and return their ids, in order."""
    if len(rows) == 1:
        return [db.execute(sql.insert_returning_id(table, False), rows[0]).scalar_one()]
    return list(db.execute(sql.insert_returning_id(table, True), list(rows)).scalars())


def known_client_ids(
    db: Connection, session_id: str, batch: Sequence[Prepared]
) -> dict[str, StoredMessage]:
    """Return the stored messages of the batch's client ids; refuse changed content."""
    wanted: dict[str, str] = {}
    for item in batch:
        client_id = item.message.client_id
        if client_id is None:
            continue
        if wanted.setdefault(client_id, item.digest) != item.digest:
            raise ConflictError(
                f"client_id {client_id!r} is used twice in one batch with different content"
            )
    if not wanted:
        return {}
    columns = sql.messages.c
    stmt = select(*sql.MESSAGE_COLUMNS).where(
        columns.session_id == session_id, columns.client_id.in_(list(wanted))
    )
    known = {row.client_id: stored_model(row, session_id) for row in db.execute(stmt).all()}
    for client_id, stored in known.items():
        if stored.content_hash != wanted[client_id]:
            raise ConflictError(
                f"client_id {client_id!r} is already stored with different content "
                f"(message {stored.id}); a retry must send the same message"
            )
    return known


def insert_messages(
    db: Connection,
    session_id: str,
    loop_id: int,
    items: Sequence[Prepared],
    moment: datetime,
) -> list[StoredMessage]:
    """Append prepared messages to an open loop, assigning positions and turns."""
    loop = db.execute(sql.SELECT_LOOP_STATE, {"lid": loop_id, "sid": session_id}).first()
    if loop is None:
        raise LoopNotFoundError(loop_id, session_id=session_id)
    if loop.closed_at is not None:
        raise ConflictError(
            f"loop {loop_id} is closed: append to the active loop or start a new one"
        )
    assigner = TurnAssigner(loop.turn_count, frozenset(loop.open_tool_call_ids))
    rows = []
    for offset, item in enumerate(items):
        message = item.message
        is_tool = isinstance(message, ToolResultMessage)
        rows.append(
            {
                "session_id": session_id,
                "loop_id": loop_id,
                "position": loop.message_count + offset,
                "turn_index": assigner.assign(message),
                "kind": message.kind,
                "tool_call_id": message.tool_call_id if is_tool else None,  # type: ignore[union-attr]  # is_tool narrows it
                "tool_name": message.tool_name if is_tool else None,  # type: ignore[union-attr]  # is_tool narrows it
                "payload": item.payload,
                "token_count": item.token_count,
                "content_hash": item.digest,
                "client_id": message.client_id,
                "created_at": moment,
            }
        )
    ids = insert_returning_ids(db, sql.messages, rows)
    db.execute(
        sql.UPDATE_LOOP_COUNTERS,
        {
            "lid": loop_id,
            "sid": session_id,
            "n": len(rows),
            "tokens": sum(row["token_count"] for row in rows),
            "turns": assigner.next_turn,
            "open_ids": sorted(assigner.open_call_ids),
        },
    )
    return [
        StoredMessage(
            id=message_id,
            session_id=session_id,
            loop_id=loop_id,
            position=row["position"],
            turn_index=row["turn_index"],
            token_count=row["token_count"],
            content_hash=row["content_hash"],
            created_at=moment,
            message=item.message,
        )
        for message_id, row, item in zip(ids, rows, items, strict=True)
    ]


def turns(db: Connection, session_id: str, loop_id: int, span: TurnRange) -> list[StoredMessage]:
    """Return the messages of an inclusive turn range of a loop, in order."""
    loop = loop_row(db, session_id, loop_id)
    if span.end_turn >= loop.turn_count:
        raise InvalidBlockError(
            f"turn range {span.start_turn}..{span.end_turn} is out of bounds: "
            f"loop {loop_id} has {loop.turn_count} turns"
        )
    params = {"sid": session_id, "lid": loop_id, "a": span.start_turn, "b": span.end_turn}
    return stored_models(db.execute(sql.SELECT_RAW_TURNS, params).all(), session_id)


def turn_map(db: Connection, session_id: str, loop_id: int) -> TurnMap:
    """Return a loop's `TurnMap`, from the turn index."""
    rows = db.execute(sql.SELECT_TURN_BOUNDS, {"sid": session_id, "lid": loop_id}).all()
    return TurnMap.from_bounds((first, last) for first, last in rows)


def by_id(db: Connection, session_id: str, message_ids: Iterable[int]) -> list[StoredMessage]:
    """Return the raw messages with these ids, in id order (which is loop and position order)."""
    ids = sorted(set(message_ids))
    if not ids:
        return []
    wanted = set(ids)
    columns = sql.messages.c
    stmt = (
        select(*sql.MESSAGE_COLUMNS)
        .where(columns.session_id == session_id, columns.id.between(ids[0], ids[-1]))
        .order_by(columns.id)
    )
    rows = [row for row in db.execute(stmt).all() if row.id in wanted]
    return stored_models(rows, session_id)
