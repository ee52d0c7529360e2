"""Reads of one string of the active chain's stored payloads, for adapters that keep one.

An SDK adapter answers "give me the session's items" from what was stored; building a
`StoredMessage` (and validating each message) for that costs several times the read
itself. An adapter that keeps its own JSON text of a message in the message's `extra`
(the openai-agents session keeps the SDK items it was given) reads that string back here,
taken out of the payload by the database, and the whole payload (the JSON text the message
was stored as, NUL encoding undone on PostgreSQL) only for a message without it: no other
column, no model. One statement a call, for the chain that ends at the session's active
loop, found by a subquery, and a second one only when some message has no such string (its
payload, by id); the visibility check (a missing session, another tenant's) runs only when
no row came back.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import (
    Connection,
    Text,
    bindparam,
    cast,
    func,
    literal_column,
    select,
    type_coerce,
)

from sessionstore.store._engine import rows_of
from sessionstore.store._nul import NulSafeJSONText
from sessionstore.store._sessions import SessionKey, visible_session
from sessionstore.store._statements import SESSION_WHERE, keyed, loops, messages, sessions
from sessionstore.store._tables import KEY_COLUMNS

__all__ = ["chain_strings"]

_PAYLOAD_TEXT = type_coerce(cast(messages.c.payload, Text), NulSafeJSONText())


def _walk(newest: bool) -> Any:
    """The chain's loops from the active loop back to the root.

    With `newest`, the walk stops at the first loop where the messages counted so far
    (`total`, from the loops' `message_count`) reach `:n`: older loops hold none of the
    newest `:n`.
    """
    active = select(sessions.c.active_loop_id).where(*SESSION_WHERE).scalar_subquery()
    walk = (
        select(
            loops.c.id,
            loops.c.parent_loop_id,
            loops.c.message_count.label("total"),
            *(loops.c[name] for name in KEY_COLUMNS),
        )
        .where(loops.c.id == active, *keyed(loops))
        .cte("payload_chain", recursive=True)
    )
    parent = loops.alias("parent")
    step = select(
        parent.c.id,
        parent.c.parent_loop_id,
        walk.c.total + parent.c.message_count,
        *(parent.c[name] for name in KEY_COLUMNS),
    ).where(
        parent.c.id == walk.c.parent_loop_id,
        parent.c.session_id == bindparam("sid"),
        *(parent.c[name] == walk.c[name] for name in KEY_COLUMNS),
    )
    if newest:
        step = step.where(walk.c.total < bindparam("n"))
    return walk.union_all(step)


def _string_at(dialect: str, path: tuple[str, ...]) -> Any:
    """The string at `path` in the payload, as text (NULL where there is none)."""
    # The keys are plain names (the caller checks), so they are written into the SQL.
    found: Any
    if dialect == "postgresql":
        found = messages.c.payload.op("#>>")(literal_column(f"'{{{','.join(path)}}}'::text[]"))
    else:
        found = func.json_extract(messages.c.payload, literal_column(f"'$.{'.'.join(path)}'"))
    return type_coerce(found, NulSafeJSONText())


@cache
def select_chain_strings(dialect: str, path: tuple[str, ...], newest: bool) -> Any:
    """Select `(string at path, message id)` of the active chain's messages.

    All in order, or the newest `:n`, newest first. The messages are found by
    `loop_id IN (the chain)` and ordered by `(loop_id, position)`, the order of the
    unique index the lookup uses, so nothing is sorted: a loop is always created after
    its parent, so its id is larger and the chain's loops in id order are root first.
    The string is extracted once a row (the database parses the whole payload for it);
    the payloads of the rows without one are read apart (`SELECT_PAYLOADS`).
    """
    walk = _walk(newest)
    columns = (_string_at(dialect, path).label("found"), messages.c.id)
    stmt = select(*columns).where(*keyed(messages), messages.c.loop_id.in_(select(walk.c.id)))
    if newest:
        order = (messages.c.loop_id.desc(), messages.c.position.desc())
        return stmt.order_by(*order).limit(bindparam("n"))
    return stmt.order_by(messages.c.loop_id, messages.c.position)


SELECT_PAYLOADS = select(messages.c.id, _PAYLOAD_TEXT.label("payload")).where(
    *keyed(messages), messages.c.id.in_(bindparam("ids", expanding=True))
)
"""The payloads (JSON text) of the session's messages with these ids."""

_IDS_PER_STATEMENT = 500
"""Ids bound in one `SELECT_PAYLOADS` (under every driver's parameter limit)."""


def chain_strings(
    db: Connection, key: SessionKey, path: tuple[str, ...], last: int | None
) -> list[tuple[str | None, str | None]]:
    """Return the string at `path` of each message of the active chain, oldest first.

    A message without one gives `(None, its whole payload as JSON text)` instead.

    Args:
        db: The connection, in a transaction.
        key: The session.
        path: The keys that lead to a string in a message's JSON (letters, digits, `_`).
        last: Only the newest `last` messages; None: all of them.

    Raises:
        SessionNotFoundError: no such session (or another tenant's).
    """
    if last == 0:
        visible_session(db, key)
        return []
    statement = select_chain_strings(db.dialect.name, path, last is not None)
    params: dict[str, Any] = key.params if last is None else {**key.params, "n": last}
    # On SQLite straight on the driver: the column's text as it is stored.
    rows = rows_of(db, statement, params)
    if not rows:
        visible_session(db, key)
        return []
    missing = [row[1] for row in rows if row[0] is None]
    payloads: dict[int, str] = {}
    for start in range(0, len(missing), _IDS_PER_STATEMENT):
        ids = missing[start : start + _IDS_PER_STATEMENT]
        payloads.update(
            (row[0], row[1]) for row in db.execute(SELECT_PAYLOADS, {**key.params, "ids": ids})
        )
    found: list[tuple[str | None, str | None]] = [
        (row[0], None) if row[0] is not None else (None, payloads[row[1]]) for row in rows
    ]
    if last is not None:
        found.reverse()
    return found
