"""Units of work that read a chain for the loader: the scope, blocks and raw turns in one snapshot.

A resume reads what the context holds, not the whole history: the chain is read newest
first a window at a time until the scope (the pure rule in `sessionstore._scope`) is
known to end inside it; then only the loops in scope are read further.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from sessionstore import _context_source as source
from sessionstore import _history_pages as pages
from sessionstore._context_read import blocks_of, scoped_chain
from sessionstore._loop_messages import LoopMessages
from sessionstore._scope import ChainEntry
from sessionstore.config import CompactionScope
from sessionstore.models import LoopRecord, SessionDigest, StoredMessage
from sessionstore.store import _statements as sql
from sessionstore.store._blocks import current_blocks
from sessionstore.store._chain_walk import db_walk_form, select_chain_counts, select_history
from sessionstore.store._plain import is_citus, read_plain
from sessionstore.store._sessions import SessionKey, resolve_loop, visible_session
from sessionstore.store._source import StoreSource, micros_read
from sessionstore.store._tables import decoded_models, stored_models
from sessionstore.strategies import LoopView

__all__ = [
    "chain_as_of",
    "chain_digest",
    "chain_in_scope",
    "digest_inputs",
    "loop_messages",
    "loop_messages_by_id",
    "loop_view",
]


def loop_messages(
    db: Connection,
    key: SessionKey,
    loop_id: int | None,
    last: int | None,
    *,
    decoded: bool = False,
) -> list[StoredMessage]:
    """Return a loop's messages in order (the active loop by default), or only its newest `last`.

    One statement checks the session and reads the messages; only when it returns no row
    are the session and loop checked apart (to raise the right error or return nothing).
    With `decoded`, every message is decoded now (the caller uses them all), and on SQLite
    the rows come straight from the driver.
    """
    if last != 0:
        stmt = sql.select_loop_messages(loop_id is None, last is not None)
        params: dict[str, Any] = {**key.params, "lid": loop_id, "n": last}
        found = _rows(
            db, stmt, params, key.session_id, decoded=decoded, newest_first=last is not None
        )
        if found:
            return found
    resolve_loop(db, key, loop_id)
    return []


def loop_messages_by_id(
    db: Connection, session_id: str, loop_id: int | None, last: int | None
) -> list[StoredMessage] | None:
    """`loop_messages(decoded=True)` for a store that knows the session's id only.

    One statement, with no tenant lookup before it (`select_loop_messages_by_id`): it
    returns the messages when the id is one tenant's and the loop has some. Returns None
    otherwise (an empty loop, a missing session or loop, an id several tenants use), and
    on Citus, where a statement of two tables is not planned on one shard: the caller
    then looks the tenant up and calls `loop_messages`, which answers or raises as usual.
    """
    if last == 0 or is_citus(db):
        return None
    stmt = sql.select_loop_messages_by_id(loop_id is None, last is not None)
    params: dict[str, Any] = {"sid": session_id, "lid": loop_id, "n": last}
    found = _rows(db, stmt, params, session_id, decoded=True, newest_first=last is not None)
    return found or None


def chain_as_of(
    db: Connection, key: SessionKey, head: int, limit: int | None, as_of: datetime | None
) -> tuple[list[LoopRecord], bool]:
    """`_context_source.chain_as_of` on the store's connection."""
    return source.chain_as_of(StoreSource(db), key, head, limit, as_of)


def chain_digest(
    db: Connection, key: SessionKey, head: int, overlay: str, as_of: datetime | None
) -> SessionDigest | None:
    """The chain's newest digest (`_context_source.chain_digest`) on the store's connection."""
    digest, _, _ = source.chain_digest(StoreSource(db), key, head, overlay, as_of)
    return digest


def chain_in_scope(
    db: Connection,
    key: SessionKey,
    *,
    scope: CompactionScope,
    max_context_tokens: int,
    summary_cap: int | None,
    loop_id: int | None,
    overlay: str,
) -> list[ChainEntry]:
    """Return the loops in scope (root first) with their current blocks (sections, no messages)."""
    head = resolve_loop(db, key, loop_id)
    if head is None:
        return []
    entries, earlier, _, _, rows = scoped_chain(
        StoreSource(db),
        key,
        head,
        scope=scope,
        budget=max_context_tokens,
        overlay=overlay,
        moment=None,
        summary_cap=summary_cap,
    )
    if not entries:
        return []
    loops = [loop for loop, _ in entries[len(entries) - earlier - 1 :]]
    blocks = blocks_of(StoreSource(db), key, loops, rows, overlay, None, messages=False)
    return [(loop, blocks.get(loop.id)) for loop in loops]


def digest_inputs(
    db: Connection,
    key: SessionKey,
    *,
    loop_id: int | None,
    overlay: str,
    first_in_scope: int,
) -> tuple[SessionDigest | None, list[LoopRecord]]:
    """Return the chain's newest digest and the loops it does not fold yet before the scope.

    `first_in_scope` is the oldest loop in the compaction's scope; the loops returned are
    the ones between the digest's last folded loop (or the root) and it, oldest first.
    """
    head = resolve_loop(db, key, loop_id)
    if head is None:
        return None, []
    # Back to the loop the digest folds through, however long the chain before it.
    found = source.chain_digest(StoreSource(db), key, head, overlay, None, reach=[first_in_scope])
    digest, loops, complete = found
    if digest is None and not complete:
        loops, _ = chain_as_of(db, key, head, None, None)  # from the root
    ids = [loop.id for loop in loops]
    start = ids.index(digest.through_loop_id) + 1 if digest is not None else 0
    stop = ids.index(first_in_scope) if first_in_scope in ids else 0
    return digest, loops[start:stop] if stop > start else []


def loop_view(db: Connection, key: SessionKey, loop: LoopRecord, overlay: str) -> LoopView:
    """Return a block strategy's view of `loop` (see `SessionStore.get_loop_view`)."""
    stmt = sql.select_loop_messages(False, False)
    params: dict[str, Any] = {**key.params, "lid": loop.id}
    messages = LoopMessages(key.session_id, loop.id, db.execute(stmt, params))
    if not messages:
        resolve_loop(db, key, loop.id)
    blocks = current_blocks(db, key, [loop], overlay, None, messages=True)
    return LoopView.of(loop, messages, blocks.get(loop.id))


def history(
    db: Connection, key: SessionKey, head: int, *, decoded: bool = False
) -> list[StoredMessage]:
    """Return every raw message of the chain ending at `head`, in order.

    `decoded`: as in `loop_messages`.

    One statement joins the messages to the chain's recursive CTE: no loop id is sent
    as a parameter, so a chain of any length reads on every driver.
    """
    statement = select_history(db_walk_form(db))
    return _rows(db, statement, {**key.params, "head": head}, key.session_id, decoded=decoded)


def chain_counts(db: Connection, key: SessionKey, head: int) -> tuple[array[int], array[int]]:
    """Return the ids and message counts of the chain ending at `head`, root first.

    Two flat arrays: a chain of a million loops takes 16 MB, not a million models.
    """
    ids, counts = array("q"), array("q")
    statement = select_chain_counts(db_walk_form(db))
    for loop_id, count in db.execute(statement, {**key.params, "head": head}):
        ids.append(loop_id)
        counts.append(count)
    return ids, counts


def history_tail(
    db: Connection, key: SessionKey, head: int, last: int, *, decoded: bool = False
) -> list[StoredMessage]:
    """Return the newest `last` messages of the chain ending at `head`, oldest first.

    Only the loops that hold them are read: the chain's message counts say where the
    newest `last` begin.
    """
    if last == 0:
        return []
    ids, counts = chain_counts(db, key, head)
    index, needed = len(ids), last
    while index and needed > 0:
        index -= 1
        needed -= counts[index]
    page, _ = history_page(db, key, (ids, counts), (index, max(0, -needed)), last, decoded=decoded)
    return page


def history_page(
    db: Connection,
    key: SessionKey,
    chain: tuple[Sequence[int], Sequence[int]],
    start: tuple[int, int],
    size: int,
    *,
    decoded: bool = False,
) -> tuple[list[StoredMessage], tuple[int, int]]:
    """Return up to `size` messages of `chain` from `start`, and where the next page starts.

    `chain` is what `chain_counts` returned when the read began; `start` is a loop's
    index in it and a position in that loop (see `_history_pages.history_page`). Each
    loop is read by the unique index `(session_id, loop_id, position)`, from the position
    reached, up to the count the loop had when the read began: messages appended since
    are not read, and every page is one short transaction.
    """
    visible_session(db, key)

    def read_range(loop_id: int, first: int, stop: int) -> list[StoredMessage]:
        params = {**key.params, "lid": loop_id, "start": first, "stop": stop}
        return _rows(db, sql.SELECT_LOOP_PAGE, params, key.session_id, decoded=decoded)

    return pages.history_page(chain, start, size, read_range)


def _rows(
    db: Connection,
    statement: Any,
    params: dict[str, Any],
    session_id: str,
    *,
    decoded: bool,
    newest_first: bool = False,
) -> list[StoredMessage]:
    """Run a statement of the message columns and build its records, oldest first.

    `decoded`: every message is decoded now (the caller uses them all), and on SQLite
    and asyncpg the rows come straight from the driver (`read_plain`: no SQLAlchemy row
    processing); otherwise each message is decoded when first used. `newest_first`: the
    statement returns its rows newest first.
    """
    plain = None
    if decoded:
        on_postgresql = db.dialect.name == "postgresql"
        plain = read_plain(db, micros_read(statement) if on_postgresql else statement, params)
    rows: Sequence[Any] = db.execute(statement, params).all() if plain is None else plain
    if newest_first:
        rows = rows[::-1]
    if decoded:
        driver = None if plain is None else db.dialect.name
        return decoded_models(rows, session_id, plain=driver)
    return stored_models(rows, session_id)
