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

An adapter that read the strings once may hand back what it has, by message id with the
message's `content_hash` (`known`): a message's row never changes, and the hash pins it
to its payload, so its string is the one it kept. Then the statement returns only ids
and hashes (no JSON parsed), and the strings of the messages it does not know are
extracted by id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import (
    Connection,
    Text,
    any_,
    bindparam,
    cast,
    func,
    literal_column,
    select,
    type_coerce,
)

from sessionstore.store._chain_walk import walk_back, walk_form
from sessionstore.store._nul import NulSafeJSONText
from sessionstore.store._plain import is_citus, rows_of
from sessionstore.store._sessions import SessionKey, visible_session
from sessionstore.store._statements import SESSION_WHERE, keyed, loops, messages, sessions

__all__ = ["ChainStrings", "chain_strings"]


@dataclass(frozen=True, slots=True)
class ChainStrings:
    """The active chain's messages, oldest first, by column."""

    ids: list[int]
    digests: list[Any]
    """Each message's `content_hash`, as the driver returns it."""
    found: list[str | None]
    """The string at the path of each message (None: it has none)."""
    payloads: dict[int, str]
    """The payload (JSON text) of each message without one, by id."""


_PAYLOAD_TEXT = type_coerce(cast(messages.c.payload, Text), NulSafeJSONText())


def _walk(newest: bool, form: str) -> Any:
    """The chain's loops from the active loop back to the root (`walk_back`).

    With `newest`, the walk stops at the first loop where the messages counted so far
    (`total`, from the loops' `message_count`) reach `:n`: older loops hold none of the
    newest `:n`.
    """
    active = select(sessions.c.active_loop_id).where(*SESSION_WHERE).scalar_subquery()
    return walk_back(
        "payload_chain",
        active,
        form,
        (loops.c.message_count.label("total"),),
        lambda walk, parent: (walk.c.total + parent.c.message_count,),
        (lambda walk: walk.c.total < bindparam("n")) if newest else None,
    )


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
def select_chain_strings(
    dialect: str, path: tuple[str, ...], newest: bool, routed: bool = False
) -> Any:
    """Select `(string at path, message id, content_hash)` of the active chain's messages.

    All in order, or the newest `:n`, newest first. The messages are found by
    `loop_id IN (the chain)` and ordered by `(loop_id, position)`, the order of the
    unique index the lookup uses, so nothing is sorted: a loop is always created after
    its parent, so its id is larger and the chain's loops in id order are root first.
    The string is extracted once a row (the database parses the whole payload for it);
    the payloads of the rows without one are read apart (`SELECT_PAYLOADS`).
    """
    found = _string_at(dialect, path).label("found")
    return _chain_select(dialect, newest, routed, found, messages.c.id, messages.c.content_hash)


@cache
def select_chain_keys(dialect: str, newest: bool, routed: bool = False) -> Any:
    """Select `(message id, content_hash)` of the active chain's messages (no JSON parsed).

    In the order of `select_chain_strings`.
    """
    return _chain_select(dialect, newest, routed, messages.c.id, messages.c.content_hash)


def _chain_select(dialect: str, newest: bool, routed: bool, *columns: Any) -> Any:
    """Select `columns` of the active chain's messages, in order (see `select_chain_strings`).

    On PostgreSQL the chain's loop ids are gathered once (`= ANY (ARRAY(...))`, run once
    before the scan) and the messages' index finds each loop's rows. Written `IN (the
    walk)`, a table whose statistics say a session has few messages got a semi join that
    compared each message with every loop of the chain: messages times loops
    (`tests/integration/store/test_chain_walk.py`).
    """
    walk = _walk(newest, walk_form(dialect, routed))
    ids = select(walk.c.id)
    in_chain = (
        messages.c.loop_id == any_(func.array(ids.scalar_subquery()))
        if dialect == "postgresql"
        else messages.c.loop_id.in_(ids)
    )
    stmt = select(*columns).where(*keyed(messages), in_chain)
    if newest:
        order = (messages.c.loop_id.desc(), messages.c.position.desc())
        return stmt.order_by(*order).limit(bindparam("n"))
    return stmt.order_by(messages.c.loop_id, messages.c.position)


_IDS: Any = bindparam("ids", expanding=True)

SELECT_PAYLOADS = select(messages.c.id, _PAYLOAD_TEXT.label("payload")).where(
    *keyed(messages), messages.c.id.in_(_IDS)
)
"""The payloads (JSON text) of the session's messages with these ids."""


@cache
def select_strings(dialect: str, path: tuple[str, ...]) -> Any:
    """Select `(message id, string at path)` of the session's messages with these ids."""
    found = _string_at(dialect, path).label("found")
    return select(messages.c.id, found).where(*keyed(messages), messages.c.id.in_(_IDS))


_IDS_PER_STATEMENT = 500
"""Ids bound in one statement by id (under every driver's parameter limit)."""


def chain_strings(
    db: Connection,
    key: SessionKey,
    path: tuple[str, ...],
    last: int | None,
    known: Mapping[int, tuple[Any, str | None]] | None = None,
) -> ChainStrings:
    """Return the string at `path` of each message of the active chain, oldest first.

    A message without one gives its whole payload as JSON text instead.

    Args:
        db: The connection, in a transaction.
        key: The session.
        path: The keys that lead to a string in a message's JSON (letters, digits, `_`).
        last: Only the newest `last` messages; None: all of them.
        known: Strings read before, by message id with the message's `content_hash`
            (as this returns them; None for a message without one): a message whose id
            and hash are there is not read again.

    Raises:
        SessionNotFoundError: no such session (or another tenant's).
    """
    if last == 0:
        visible_session(db, key)
        return ChainStrings([], [], [], {})
    newest = last is not None
    params: dict[str, Any] = key.params if last is None else {**key.params, "n": last}
    dialect, routed = db.dialect.name, is_citus(db)
    statement = (
        select_chain_keys(dialect, newest, routed)
        if known
        else select_chain_strings(dialect, path, newest, routed)
    )
    # On SQLite straight on the driver: the column's text (and the hash) as it is stored.
    rows = rows_of(db, statement, params)
    if newest:
        rows = rows[::-1]
    if known:
        ids = [row[0] for row in rows]
        digests = [row[1] for row in rows]
        found: list[str | None] = []
        unknown: list[int] = []
        for message_id, digest in rows:
            entry = known.get(message_id)
            if entry is not None and entry[0] == digest:
                found.append(entry[1])
            else:
                found.append(None)
                unknown.append(message_id)
        if unknown:
            strings = _by_id(db, key, select_strings(db.dialect.name, path), unknown)
            found = [
                strings.get(message_id, text) for message_id, text in zip(ids, found, strict=True)
            ]
    elif rows:
        # By column in one pass in C (`zip`), not one comprehension a column.
        columns = zip(*rows, strict=True)
        found, ids, digests = list(next(columns)), list(next(columns)), list(next(columns))
    if not rows:
        visible_session(db, key)
        return ChainStrings([], [], [], {})
    payloads: dict[int, str] = {}
    if None in found:
        missing = [message_id for message_id, text in zip(ids, found, strict=True) if text is None]
        payloads = _by_id(db, key, SELECT_PAYLOADS, missing)
    return ChainStrings(ids, digests, found, payloads)


def _by_id(db: Connection, key: SessionKey, statement: Any, ids: list[int]) -> dict[int, Any]:
    """Run a statement of `(id, value)` by `ids`, in chunks; return the values by id."""
    values: dict[int, Any] = {}
    for start in range(0, len(ids), _IDS_PER_STATEMENT):
        chunk = ids[start : start + _IDS_PER_STATEMENT]
        values.update(
            (row[0], row[1]) for row in db.execute(statement, {**key.params, "ids": chunk})
        )
    return values
