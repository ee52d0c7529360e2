"""PostgreSQL's append: messages and loop counters in one statement.

An assistant message's usage is read from its payload (migration 0011), so no usage row
is written; `check_message_usage` refuses counts a usage sum could not hold.

When the store knows the loop's state, the session's write lock is in it too, and the
statement is the whole transaction: one round trip (`LOCK_AND_INSERT_IF_CURRENT`). Citus takes
the plain statements of `_messages.insert_messages` instead (a data-modifying CTE runs
there in several steps through the coordinator).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import DBAPIError

from sessionstore._turns import TurnAssigner
from sessionstore.models import StoredMessage, ToolResultMessage, message_payload
from sessionstore.models._batch import paused_gc
from sessionstore.store import _statements as sql
from sessionstore.store._nul import escape, escape_json_text
from sessionstore.store._plain import CITUS_INFO, driver_values, on_asyncpg
from sessionstore.store._search_vector import vector_values
from sessionstore.store._sessions import Locked, SessionKey
from sessionstore.store._usage import check_message_usage

if TYPE_CHECKING:
    from sqlalchemy.pool import PoolProxiedConnection

    from sessionstore.store._messages import LoopState, Prepared

__all__ = ["LockHint", "drives", "insert", "insert_on_driver"]


@dataclass(frozen=True, slots=True)
class LockHint:
    """Take the session's lock in the insert: the rows go in only if it finds `state` current."""

    is_loop_named: bool
    """The caller named the loop (else it must still be the session's active loop)."""
    is_unscoped: bool
    """The key came from the store's cache, not from a tenant handle (see `session_key`)."""


def _or_none(value: str | None) -> str | None:
    return None if value is None else escape(value)


def _values(
    key: SessionKey, state: LoopState, items: Sequence[Prepared]
) -> tuple[dict[str, Any], list[int], list[int], TurnAssigner]:
    """The append statement's parameters, the rows' positions and turns, and the turns after."""
    check_message_usage(item.message for item in items)
    start = state.message_count
    assigner = TurnAssigner(state.turn_count, state.open_tool_call_ids)
    count = len(items)
    positions = list(range(start, start + count))
    turn_indexes: list[int] = []
    kinds: list[str] = []
    call_ids: list[str | None] = []
    tool_names: list[str | None] = []
    for item in items:
        message = item.message
        turn_indexes.append(assigner.assign(message))
        kinds.append(message.kind)
        if isinstance(message, ToolResultMessage):
            call_ids.append(escape(message.tool_call_id))
            tool_names.append(escape(message.tool_name))
        else:
            call_ids.append(None)
            tool_names.append(None)
    open_ids = sorted(assigner.open_call_ids)
    vectors_or_texts = [vector_values(item.message) for item in items]
    # The arrays bypass the column types, so encode NUL here as they would (_nul.py).
    params: dict[str, Any] = {
        "sid": escape(key.session_id),
        "app": escape(key.app_name),
        "user": escape(key.user_id),
        "lid": state.loop_id,
        "positions": positions,
        "turn_indexes": turn_indexes,
        "kinds": kinds,
        "tool_call_ids": call_ids,
        "tool_names": tool_names,
        "payloads": [
            escape_json_text(item.text, partial(message_payload, item.message)) for item in items
        ],
        "token_counts": [item.token_count for item in items],
        "hashes": [bytes.fromhex(item.digest) for item in items],  # 32 bytes (0011)
        "client_ids": [_or_none(item.message.client_id) for item in items],
        "vectors": [vector for vector, _ in vectors_or_texts],
        "search_texts": [text for _, text in vectors_or_texts],
        "n": count,
        "tokens": sum(item.token_count for item in items),
        "turns": assigner.next_turn,
        "open_ids": escape_json_text(json.dumps(open_ids), lambda: open_ids),
    }
    return params, positions, turn_indexes, assigner


def _stored(
    key: SessionKey,
    loop_id: int,
    items: Sequence[Prepared],
    moment: datetime,
    positions: list[int],
    turn_indexes: list[int],
    by_position: dict[int, int],
) -> list[StoredMessage]:
    """The stored messages of an append, given each position's new id."""
    build = StoredMessage._of
    return [
        build(
            by_position[position],
            key.session_id,
            loop_id,
            position,
            turn_index,
            item.token_count,
            item.digest,
            moment,
            item.message,
        )
        for position, turn_index, item in zip(positions, turn_indexes, items, strict=True)
    ]


def insert(
    db: Connection,
    key: SessionKey,
    state: LoopState,
    items: Sequence[Prepared],
    moment: datetime,
    lock: LockHint | None = None,
) -> tuple[list[StoredMessage] | None, int, frozenset[str], Locked | None]:
    """Append prepared messages to an open loop in one statement.

    Returns the stored messages, the loop's next turn and open tool call ids after them,
    and, with `lock`, what the lock returned. With `lock` the statement must run outside a
    transaction block (`TransactionRunner.run_alone`): it is the whole write, and it writes
    nothing, returning `(None, 0, frozenset(), None)`, unless `state` is current.
    """
    params, positions, turn_indexes, assigner = _values(key, state, items)
    params["created"] = moment
    locked: Locked | None = None
    if lock is None:
        by_position = {
            position: message_id
            for message_id, position in db.execute(sql.INSERT_MESSAGES_AND_COUNT, params)
        }
    else:
        params["version"] = state.version + 1
        params["named"] = lock.is_loop_named
        params["unscoped"] = lock.is_unscoped
        result = db.execute(sql.LOCK_AND_INSERT_IF_CURRENT, params).all()
        if not result:
            return None, 0, frozenset(), None
        first = result[0]
        locked = Locked(first[0], first[1], first[2])
        by_position = {row[4]: row[3] for row in result}
    stored = _stored(key, state.loop_id, items, moment, positions, turn_indexes, by_position)
    return stored, assigner.next_turn, assigner.open_call_ids, locked


def drives(engine: Engine) -> bool:
    """Whether `insert_on_driver` may run on the engine (asyncpg, no cursor listeners)."""
    return on_asyncpg(engine.dialect, engine.dispatch)


async def insert_on_driver(
    engine: Engine,
    pooled: PoolProxiedConnection,
    key: SessionKey,
    state: LoopState,
    items: Sequence[Prepared],
    moment: datetime,
    lock: LockHint,
) -> tuple[list[StoredMessage] | None, int, frozenset[str], Locked | None] | None:
    """`insert` with `lock`, sent as asyncpg's own prepared statement: one round trip.

    What `TransactionRunner.run_alone` and `insert` do, without SQLAlchemy's execution
    around the one statement (a greenlet, a transaction's bookkeeping, the cursor, the
    result's processing: about half the client's time of a one-message append): the
    pooled connection's asyncpg connection runs it outside a transaction block, so the
    server commits it as it ends. Same statement, same parameters (the bind processors
    of the compiled statement applied), same answer. Errors are translated as SQLAlchemy
    would (`DBAPIError`), and a connection the error left broken is invalidated.

    For an engine that `drives` (the caller checks, before it takes a connection).
    Returns None, having sent nothing, where SQLAlchemy's path must run instead: a Citus
    database or one not yet asked (`_plain.is_citus`).
    """
    dialect = engine.dialect
    if pooled.info.get(CITUS_INFO, True):
        return None
    with paused_gc():
        params, positions, turn_indexes, assigner = _values(key, state, items)
        params["created"] = moment
        params["version"] = state.version + 1
        params["named"] = lock.is_loop_named
        params["unscoped"] = lock.is_unscoped
        text, values = driver_values(dialect, sql.LOCK_AND_INSERT_IF_CURRENT, params)
    driver: Any = pooled.driver_connection
    try:
        rows = await driver.fetch(text, *values)
    except Exception as exc:
        raise await _translated(dialect, pooled, text, exc) from exc
    if not rows:
        return None, 0, frozenset(), None
    first = rows[0]
    locked = Locked(first[0], first[1], first[2])
    by_position = {row[4]: row[3] for row in rows}
    with paused_gc():
        stored = _stored(key, state.loop_id, items, moment, positions, turn_indexes, by_position)
    return stored, assigner.next_turn, assigner.open_call_ids, locked


async def _translated(
    dialect: Dialect, pooled: PoolProxiedConnection, text: str, exc: Exception
) -> BaseException:
    """The error SQLAlchemy would raise for `exc` (a broken connection is invalidated)."""
    from sqlalchemy.util import greenlet_spawn

    adapter: Any = pooled.dbapi_connection
    dbapi_error: Any = dialect.loaded_dbapi.Error
    try:
        adapter._handle_exception(exc)  # raises the DBAPI adapter's error
    except dbapi_error as error:
        broken = dialect.is_disconnect(error, adapter, None)
        if broken:
            await greenlet_spawn(pooled.invalidate)
        return DBAPIError.instance(  # type: ignore[no-any-return]  # an error
            text, None, error, dbapi_error, connection_invalidated=broken
        )
    except Exception as other:  # not the driver's: a broken socket, say
        await greenlet_spawn(pooled.invalidate)
        return other
    raise AssertionError("unreachable: _handle_exception always raises")  # pragma: no cover
