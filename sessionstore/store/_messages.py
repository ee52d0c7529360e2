"""Units of work on raw messages: append (with idempotent client ids) and plain reads.

Raw messages are append-only: nothing here updates or deletes one, and the database
refuses an UPDATE of a message row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, get_args

from sqlalchemy import Connection, Table, insert, select

from sessionstore._tokens import TokenCounter
from sessionstore._turns import TurnAssigner, TurnMap
from sessionstore.errors import (
    ClientIdConflictError,
    ConflictError,
    InvalidBlockError,
    LoopNotFoundError,
)
from sessionstore.models import (
    MESSAGE_ADAPTER,
    Message,
    StoredMessage,
    ToolResultMessage,
    TurnRange,
    canonical_message,
    message_payload,
)
from sessionstore.models._limits import MAX_INT, check_count
from sessionstore.store import _statements as sql
from sessionstore.store._plain import insert_plain, is_citus, run_plain
from sessionstore.store._sessions import Locked, SessionKey, bound_time, loop_row
from sessionstore.store._tables import stored_model, stored_models
from sessionstore.store._usage import check_message_usage

if TYPE_CHECKING:
    from sessionstore.store._pg_append import LockHint

__all__ = [
    "LoopState",
    "Prepared",
    "append_to_loop",
    "by_id",
    "insert_messages",
    "insert_returning_ids",
    "known_client_ids",
    "lock_and_insert",
    "lock_known",
    "prepare",
    "prepare_all",
    "turn_map",
    "turns",
    "validated",
]


class Prepared(NamedTuple):
    """What a message row needs, computed before the transaction opens.

    A named tuple: built for every appended message, where a frozen dataclass's
    `__init__` (a call a field) cost as much as hashing the message.
    """

    message: Message
    text: str
    """The canonical JSON of `payload`: what is hashed, and what is stored on SQLite."""
    digest: str
    token_count: int

    @property
    def payload(self) -> dict[str, Any]:
        """The stored payload as a dict (`message_payload`), built when asked for.

        SQLite writes `text` alone; the other paths ask for the dict only where they need it.
        """
        return message_payload(self.message)


@dataclass(frozen=True, slots=True)
class LoopState:
    """A loop's append state as of one session version: what an append needs to know."""

    loop_id: int
    version: int
    """The session version this state is true at."""
    message_count: int
    turn_count: int
    open_tool_call_ids: frozenset[str]


_MESSAGE_CLASSES = frozenset(get_args(get_args(Message)[0]))
"""The classes of the `Message` union: what `validated` returns as it is."""


def validated(message: Any) -> Message:
    """Return `message` as a model of the message union; dicts are validated into one."""
    if isinstance(message, Mapping):
        return MESSAGE_ADAPTER.validate_python(message)
    if not hasattr(message, "kind") or not hasattr(message, "client_id"):
        raise TypeError(f"not a message: {type(message).__name__}")
    return message  # type: ignore[no-any-return]  # a model of the Message union


def prepare(message: Message, counter: TokenCounter) -> Prepared:
    """Serialise, hash and count a message once (`prepare_all` of the one message)."""
    return prepare_all((message,), counter)[0]


def prepare_all(messages: Iterable[Any], counter: TokenCounter) -> list[Prepared]:
    """Validate (`validated`), serialise, hash and count each message once, in one loop.

    The search text is not computed here: SQLite derives it from the payload in the
    database (migration 0010), PostgreSQL's insert computes it (`insert_messages`).
    A batch's messages are prepared in one pass with the callables looked up once. The
    token count (a 32-bit column) goes to `check_count` only when it is not a 32-bit
    count already.
    """
    canonical_of = canonical_message
    sha256 = hashlib.sha256
    count = counter.count_message
    most = MAX_INT
    models = _MESSAGE_CLASSES
    out: list[Prepared] = []
    for message in messages:
        if type(message) not in models:  # a model of the union is valid already
            message = validated(message)
        canonical = canonical_of(message)
        tokens = count(message)
        if type(tokens) is not int or not 0 <= tokens <= most:
            check_count(tokens, "token_count")  # what the token counter returned
        out.append(Prepared(message, canonical.decode(), sha256(canonical).hexdigest(), tokens))
    return out


def insert_returning_ids(
    db: Connection, table: Table, rows: Sequence[Mapping[str, Any]]
) -> list[int]:
    """Insert rows of one table and return their ids, in order."""
    if len(rows) == 1 or is_citus(db):
        # On Citus a row at a time: the ordered many-row form is an INSERT ... SELECT.
        one = sql.insert_returning_id(table, False)
        return [db.execute(one, row).scalar_one() for row in rows]
    return list(db.execute(sql.insert_returning_id(table, True), list(rows)).scalars())


def lock_known(db: Connection, key: SessionKey, moment: datetime) -> Locked | None:
    """SQLite: lock the session under a key the unscoped store found before, if still its.

    One statement for the look-up of the session's tenant and the version bump (see
    `LOCK_ONLY_SESSION`). None when no row was locked (the session is gone, or another
    tenant now has a session of that id): nothing was written, and the caller looks the
    key up and locks as usual, which raises what it should.
    """
    params = {"now": bound_time(db, moment), **key.params}
    rows = run_plain(db, sql.LOCK_ONLY_SESSION, params)
    if not rows:
        return None
    version, active_loop_id, loop_count = rows[0]
    return Locked(version, active_loop_id, loop_count)


def known_client_ids(
    db: Connection, key: SessionKey, batch: Sequence[Prepared]
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
        *sql.keyed(sql.messages), columns.client_id.in_(list(wanted))
    )
    rows = db.execute(stmt, key.params).all()
    known = {row.client_id: stored_model(row, key.session_id) for row in rows}
    for client_id, stored in known.items():
        if stored.content_hash != wanted[client_id]:
            raise ClientIdConflictError(client_id, stored.id)
    return known


_MESSAGE_INSERT_COLUMNS = (
    "session_id",
    "loop_id",
    "position",
    "turn_index",
    "kind",
    "tool_call_id",
    "tool_name",
    "payload",
    "token_count",
    "content_hash",
    "client_id",
    "created_at",
    "app_name",
    "user_id",
)
"""The columns SQLite's insert writes (PostgreSQL's adds the search vector, migration 0012)."""


def loop_state(db: Connection, key: SessionKey, loop_id: int, version: int) -> LoopState:
    """Read an open loop's append state (the session is locked at `version`)."""
    loop = db.execute(sql.SELECT_LOOP_STATE, {"lid": loop_id, **key.params}).first()
    if loop is None:
        raise LoopNotFoundError(loop_id, session_id=key.session_id)
    if loop.closed_at is not None:
        raise ConflictError(
            f"loop {loop_id} is closed: append to the active loop or start a new one"
        )
    return LoopState(
        loop_id, version, loop.message_count, loop.turn_count, frozenset(loop.open_tool_call_ids)
    )


def insert_messages(
    db: Connection,
    key: SessionKey,
    state: LoopState,
    items: Sequence[Prepared],
    moment: datetime,
) -> tuple[list[StoredMessage], LoopState]:
    """Append prepared messages to an open loop, assigning positions and turns.

    `state` is the loop's state at the locked session version; the loop's state after
    the append is returned with the stored messages.
    """
    if db.dialect.name == "postgresql" and not is_citus(db):
        from sessionstore.store import _pg_append  # PostgreSQL's path: a read never loads it

        stored, next_turn, open_call_ids, _ = _pg_append.insert(db, key, state, items, moment)
        assert stored is not None  # no lock hint: the rows are always written
        return stored, _after(state, len(items), next_turn, open_call_ids)
    loop_id, start = state.loop_id, state.message_count
    check_message_usage(item.message for item in items)
    assigner = TurnAssigner(state.turn_count, state.open_tool_call_ids)
    # Bind-ready values, in _MESSAGE_INSERT_COLUMNS order; `created_at` is one value for
    # the whole batch, so its type's bind processing runs once, not once a row.
    created = bound_time(db, moment)
    session_id, app_name, user_id = key.session_id, key.app_name, key.user_id
    assign, fromhex, tool_result = assigner.assign, bytes.fromhex, ToolResultMessage
    rows: list[tuple[Any, ...]] = []
    position = start
    for item in items:
        message = item.message
        is_tool = isinstance(message, tool_result)
        rows.append(
            (
                session_id,
                loop_id,
                position,
                assign(message),
                message.kind,
                message.tool_call_id if is_tool else None,  # type: ignore[union-attr]  # is_tool narrows it
                message.tool_name if is_tool else None,  # type: ignore[union-attr]  # is_tool narrows it
                item.text,
                item.token_count,
                fromhex(item.digest),  # the digest's 32 bytes (migration 0011)
                message.client_id,
                created,
                app_name,
                user_id,
            )
        )
        position += 1
    open_ids = sorted(assigner.open_call_ids)
    ids = insert_plain(db, sql.messages, _MESSAGE_INSERT_COLUMNS, rows)
    if ids is None:  # Citus: two statements, each routed to the session's node
        from sessionstore.store._search_vector import pg_messages, vector_expression

        values = [
            dict(
                zip(
                    _MESSAGE_INSERT_COLUMNS,
                    (*row[:7], item.payload, *row[8:11], moment, *row[12:]),
                    strict=True,
                ),
                search_vector=vector_expression(item.message),
            )
            for row, item in zip(rows, items, strict=True)
        ]
        table = pg_messages()
        inserted = insert(table).values(values).returning(table.c.id, table.c.position)
        by_position = {position: message_id for message_id, position in db.execute(inserted)}
        ids = [by_position[row[2]] for row in rows]
        counters = {
            "lid": loop_id,
            **key.params,
            "n": len(rows),
            "tokens": sum(item.token_count for item in items),
            "turns": assigner.next_turn,
            "open_ids": open_ids,
        }
        db.execute(sql.UPDATE_LOOP_COUNTERS, counters)
    else:
        counters = {
            "lid": loop_id,
            **key.params,
            "n": len(rows),
            "tokens": sum(item.token_count for item in items),
            "turns": assigner.next_turn,
            "open_ids": json.dumps(open_ids),  # bind-ready JSON text
        }
        run_plain(db, sql.UPDATE_LOOP_COUNTERS, counters)
    build = StoredMessage._of
    stored = [
        build(
            message_id,
            session_id,
            loop_id,
            row[2],
            row[3],
            item.token_count,
            item.digest,
            moment,
            item.message,
        )
        for message_id, row, item in zip(ids, rows, items, strict=True)
    ]
    return stored, _after(state, len(rows), assigner.next_turn, frozenset(assigner.open_call_ids))


def _after(
    state: LoopState, count: int, next_turn: int, open_call_ids: frozenset[str]
) -> LoopState:
    return LoopState(
        state.loop_id, state.version, state.message_count + count, next_turn, open_call_ids
    )


def lock_and_insert(
    db: Connection,
    key: SessionKey,
    state: LoopState,
    items: Sequence[Prepared],
    moment: datetime,
    hint: LockHint,
) -> tuple[list[StoredMessage], LoopState, Locked] | None:
    """PostgreSQL: take the session's lock and append to a loop in one statement.

    `db` must be outside a transaction block (`TransactionRunner.run_alone`): the
    statement is the whole write. The rows go in only if `state` (cached by this store) is
    still current. Returns the stored messages, the loop's state after them and the lock;
    None when nothing was written (`state` was stale, or the session was not found under
    `key`): the caller appends as usual, in a transaction.
    """
    from sessionstore.store import _pg_append

    return after_lock(state, len(items), _pg_append.insert(db, key, state, items, moment, hint))


def after_lock(
    state: LoopState,
    count: int,
    done: tuple[list[StoredMessage] | None, int, frozenset[str], Locked | None],
) -> tuple[list[StoredMessage], LoopState, Locked] | None:
    """`lock_and_insert`'s answer from `_pg_append`'s (also `insert_on_driver`'s)."""
    stored, next_turn, open_call_ids, locked = done
    if stored is None or locked is None:
        return None
    return stored, _after(state, count, next_turn, open_call_ids), locked


def append_to_loop(
    db: Connection, key: SessionKey, loop_id: int, items: Sequence[Prepared], moment: datetime
) -> list[StoredMessage]:
    """Append to an open loop read in this transaction (no cached state): the other writers."""
    stored, _ = insert_messages(db, key, loop_state(db, key, loop_id, 0), items, moment)
    return stored


def turns(db: Connection, key: SessionKey, loop_id: int, span: TurnRange) -> list[StoredMessage]:
    """Return the messages of an inclusive turn range of a loop, in order."""
    loop = loop_row(db, key, loop_id)
    if span.end_turn >= loop.turn_count:
        raise InvalidBlockError(
            f"turn range {span.start_turn}..{span.end_turn} is out of bounds: "
            f"loop {loop_id} has {loop.turn_count} turns"
        )
    params = {**key.params, "lid": loop_id, "a": span.start_turn, "b": span.end_turn}
    return stored_models(db.execute(sql.SELECT_RAW_TURNS, params).all(), key.session_id)


def turn_map(db: Connection, key: SessionKey, loop_id: int) -> TurnMap:
    """Return a loop's `TurnMap`, from the turn index."""
    rows = db.execute(sql.SELECT_TURN_BOUNDS, {**key.params, "lid": loop_id}).all()
    return TurnMap.from_bounds((first, last) for first, last in rows)


def by_id(db: Connection, key: SessionKey, message_ids: Iterable[int]) -> list[StoredMessage]:
    """Return the raw messages with these ids, in id order (which is loop and position order)."""
    ids = sorted(set(message_ids))
    if not ids:
        return []
    wanted = set(ids)
    columns = sql.messages.c
    stmt = (
        select(*sql.MESSAGE_COLUMNS)
        .where(*sql.keyed(sql.messages), columns.id.between(ids[0], ids[-1]))
        .order_by(columns.id)
    )
    rows = [row for row in db.execute(stmt, key.params).all() if row.id in wanted]
    return stored_models(rows, key.session_id)
