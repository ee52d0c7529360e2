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

from sqlalchemy import (
    BigInteger,
    Connection,
    Row,
    cast,
    extract,
    func,
    literal_column,
    select,
)

from sessionstore._items import ContextSources, LoopSource
from sessionstore._loop_messages import LoopMessages
from sessionstore._scope import (
    ChainEntry,
    grow_window,
    loop_context_tokens,
    loops_shown,
    recorded_scope,
    resolve_scope,
    scope_window,
)
from sessionstore.config import CompactionScope, TokenBudget
from sessionstore.errors import BlockNotFoundError
from sessionstore.models import (
    CompactionBlock,
    LoopRecord,
    SessionDigest,
    StoredMessage,
    SystemMessage,
    TurnRange,
)
from sessionstore.store import _statements as sql
from sessionstore.store._blocks import (
    block_rows,
    check_overlay,
    current_blocks,
    load_blocks,
    newest_digest,
)
from sessionstore.store._plain import is_citus, read_plain
from sessionstore.store._sessions import SessionKey, chain, resolve_loop, visible_session
from sessionstore.store._tables import (
    block_model,
    decoded_models,
    loop_model,
    stored_model,
    stored_models,
)
from sessionstore.strategies import LoopView

__all__ = [
    "chain_as_of",
    "chain_in_scope",
    "digest_inputs",
    "loop_messages",
    "loop_messages_by_id",
    "loop_view",
    "read_context",
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
    """Return the newest `limit` loops of the chain (root first) and whether that is all.

    With `as_of`, loops created later are skipped, so the chain ends at the newest
    ancestor of `head` that existed then, and each loop's counters are as they were.
    """

    def attempt(fetch: int | None) -> tuple[list[LoopRecord], bool] | None:
        loops = chain(db, key, head, fetch)
        complete = fetch is None or len(loops) < fetch or loops[0].parent_loop_id is None
        if as_of is not None:
            loops = [loop for loop in loops if loop.created_at <= as_of]
        if limit is None or len(loops) > limit or complete:
            return loops, limit is None or len(loops) <= limit
        return None

    if limit is None:
        found = attempt(None)
        assert found is not None  # an unlimited read is always complete
        loops, complete = found
    else:
        # One loop more than asked, so a full read proves the chain goes on.
        loops, complete = grow_window(limit + 1, attempt)
    if not complete:
        loops = loops[len(loops) - (limit or 0) :]
    if as_of is not None:
        loops = _loops_as_of(db, key, loops, as_of)
    return loops, complete


def _only_root(db: Connection, key: SessionKey, moment: datetime | None) -> LoopRecord | None:
    """Return the session's one root loop, or None when it has several (or `moment` is set).

    A chain's first loop is the root it ends at. A session with one root (no chain was
    started anew) needs no walk of a long chain to find it: one probe of the parent index,
    so a resume stays flat in the chain's length. Otherwise the caller walks the chain.
    """
    if moment is not None:
        return None  # the counters as of then: the walk reads them
    loops = sql.loops
    stmt = select(loops).where(*sql.keyed(loops), loops.c.parent_loop_id.is_(None)).limit(2)
    rows = db.execute(stmt, key.params).all()
    return loop_model(rows[0]) if len(rows) == 1 else None


def _loops_as_of(
    db: Connection, key: SessionKey, loops: list[LoopRecord], as_of: datetime
) -> list[LoopRecord]:
    """Return the loops with their cached counters as they were at `as_of`."""
    if not loops:
        return loops
    columns = sql.messages.c
    stmt = (
        select(
            columns.loop_id,
            func.count(),
            func.coalesce(func.sum(columns.token_count), 0),
            func.max(columns.turn_index),
        )
        .where(
            *sql.keyed(sql.messages),
            columns.loop_id.in_([loop.id for loop in loops]),
            columns.created_at <= as_of,
        )
        .group_by(columns.loop_id)
    )
    stats = {row[0]: row[1:] for row in db.execute(stmt, key.params).all()}
    result = []
    for loop in loops:
        count, tokens, last_turn = stats.get(loop.id, (0, 0, None))
        closed = loop.closed_at if loop.closed_at and loop.closed_at <= as_of else None
        changes = {
            "message_count": count,
            "token_total": int(tokens),
            "turn_count": 0 if last_turn is None else last_turn + 1,
            "closed_at": closed,
        }
        result.append(loop.model_copy(update=changes))
    return result


def _as_of_time(
    db: Connection, key: SessionKey, head: int, overlay: str, as_of: datetime | int | None
) -> datetime | None:
    """Return `as_of` as a time: a generation of the head's block is read as its write time."""
    if as_of is None or isinstance(as_of, datetime):
        return as_of
    columns = sql.blocks.c
    row = db.execute(
        select(columns.created_at).where(
            *sql.keyed(sql.blocks),
            columns.loop_id == head,
            columns.overlay == overlay,
            columns.generation == as_of,
        ),
        key.params,
    ).first()
    if row is None:
        raise BlockNotFoundError(f"loop {head} has no generation {as_of} of overlay {overlay!r}")
    return row.created_at  # type: ignore[no-any-return]


def _scoped_chain(
    db: Connection,
    key: SessionKey,
    head: int,
    *,
    scope: CompactionScope | None,
    budget: int,
    overlay: str,
    moment: datetime | None,
    summary_cap: int | None = None,
) -> tuple[list[ChainEntry], int, bool, CompactionScope, dict[int, Row[Any] | None]]:
    """Read the chain a window at a time until the scope ends inside it.

    Returns the chain read (root first, with block headers: a block without its
    sections, which the scope rule does not look at), how many loops before the head
    take part, whether the chain read is the whole chain, the scope used (`scope`, or
    the one the head's current block was compacted with), and the block rows read, by
    loop id, so the caller loads the sections of the loops in scope without reading
    their blocks again.
    """
    read: dict[int, tuple[list[ChainEntry], bool]] = {}
    rows: dict[int, Row[Any] | None] = {}

    def window(size: int) -> tuple[list[ChainEntry], bool]:
        # A window read once is not read again (the recorded scope's first read is reused).
        if size not in read:
            loops, complete = chain_as_of(db, key, head, size, moment)
            _read_block_rows(db, key, [loop.id for loop in loops], rows, overlay, moment)
            headers = [(loop, rows[loop.id]) for loop in loops]
            read[size] = (
                [(loop, None if row is None else block_model(row, {})) for loop, row in headers],
                complete,
            )
        return read[size]

    chosen = scope
    if chosen is None:
        # The head's current block says which scope it was compacted with; it is in the
        # window the default scope reads, which is usually the window needed anyway.
        entries, _ = window(scope_window(recorded_scope(None)))
        chosen = recorded_scope(next((b for loop, b in entries if loop.id == head), None))
    final = chosen

    def attempt(size: int) -> tuple[list[ChainEntry], int, bool] | None:
        entries, complete = window(size)
        earlier = resolve_scope(entries, final, budget, summary_cap=summary_cap)
        if earlier < len(entries) - 1 or complete:
            return entries, earlier, complete
        return None

    entries, earlier, complete = grow_window(scope_window(final), attempt)
    return entries, earlier, complete, final, rows


def _read_block_rows(
    db: Connection,
    key: SessionKey,
    loop_ids: Sequence[int],
    rows: dict[int, Row[Any] | None],
    overlay: str,
    moment: datetime | None,
) -> None:
    """Add the current block row (None: no block) of each loop not read yet to `rows`."""
    fresh = [loop_id for loop_id in loop_ids if loop_id not in rows]
    found = block_rows(db, key, fresh, overlay, moment)
    rows.update((loop_id, found.get(loop_id)) for loop_id in fresh)


def _blocks_of(
    db: Connection,
    key: SessionKey,
    loops: Sequence[LoopRecord],
    rows: dict[int, Row[Any] | None],
    overlay: str,
    moment: datetime | None,
    *,
    messages: bool,
) -> dict[int, CompactionBlock]:
    """Return the current blocks of `loops` with their sections, from the rows already read."""
    _read_block_rows(db, key, [loop.id for loop in loops], rows, overlay, moment)
    wanted = [row for row in (rows[loop.id] for loop in loops) if row is not None]
    loaded = load_blocks(db, key, wanted, messages=messages)
    return {block.loop_id: block for block in loaded if block.loop_id is not None}


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
    entries, earlier, _, _, rows = _scoped_chain(
        db,
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
    blocks = _blocks_of(db, key, loops, rows, overlay, None, messages=False)
    return [(loop, blocks.get(loop.id)) for loop in loops]


def read_context(
    db: Connection,
    key: SessionKey,
    *,
    scope: CompactionScope | None,
    budget: int,
    loop_id: int | None,
    overlay: str,
    as_of: datetime | int | None,
    new_overlay: bool = False,
) -> ContextSources:
    """Read what the loader needs to build a loop's context (see `SessionStore.read_context`)."""
    # Imported here: it pulls the trimming code, which a call that builds no context (a
    # listing) never needs at start.
    from sessionstore._overlay import segments

    head = resolve_loop(db, key, loop_id)
    if not new_overlay:
        check_overlay(db, key, overlay)
    if head is None:
        return ContextSources([], None, None)
    moment = _as_of_time(db, key, head, overlay, as_of)
    entries, earlier, complete, used, rows = _scoped_chain(
        db, key, head, scope=scope, budget=budget, overlay=overlay, moment=moment
    )
    if not entries:
        return ContextSources([], None, moment, used)
    in_scope = [loop for loop, _ in entries[len(entries) - earlier - 1 :]]
    digest, after = _digest_and_loops_after(
        db, key, head, [loop for loop, _ in entries], complete, overlay, moment
    )
    # The digest stands for its loops; every loop after them is shown (they were in
    # scope when it was written, or have come since).
    in_scope = list(loops_shown(used, in_scope, after if digest is not None else None))
    left_out = 0
    if isinstance(used, TokenBudget) and digest is None and len(entries) > earlier + 1:
        left_out = loop_context_tokens(*entries[len(entries) - earlier - 2])
    chain: list[LoopRecord] | None = [loop for loop, _ in entries] if complete else None

    def whole_chain() -> list[LoopRecord]:
        """The whole chain, root first, read once and only when the window did not hold it."""
        nonlocal chain
        if chain is None:
            chain, _ = chain_as_of(db, key, head, None, moment)
        return chain

    root: LoopRecord | None = None
    if in_scope and in_scope[0].parent_loop_id is not None:
        root = (chain[0] if chain is not None else None) or _only_root(db, key, moment)
        if root is None:
            root = whole_chain()[0]
        if isinstance(used, TokenBudget) and digest is None:
            # No digest stands for the loops the budget left out: the chain's first loop,
            # which holds the session's task, stays in (the trimmer shortens it, last).
            in_scope = [root, *in_scope]
            root = None
    blocks = _blocks_of(db, key, in_scope, rows, overlay, moment, messages=True)
    sources = []
    for loop in in_scope:
        block = blocks.get(loop.id)
        raw: list[Row[Any]] = []
        for turns, kind in segments(loop.turn_count, block):
            if kind == "raw":
                raw.extend(_raw_turns(db, key, loop.id, turns, moment))
        sources.append(LoopSource(loop, block, stored_models(raw, key.session_id)))
    newest = [loop.id for loop, _ in reversed(entries)]
    latest = _latest_user(db, key, newest, moment)
    if latest is None and not complete:
        known = set(newest)
        older = [loop.id for loop in reversed(whole_chain()) if loop.id not in known]
        latest = _latest_user(db, key, older, moment)
    system = [] if root is None else _system_prompt(db, key, root, moment)
    return ContextSources(sources, latest, moment, used, digest, left_out, system)


def _system_prompt(
    db: Connection, key: SessionKey, root: LoopRecord, moment: datetime | None
) -> list[StoredMessage]:
    """Return the system messages that open the chain's first loop (its system prompt)."""
    if root.turn_count == 0:
        return []
    rows = _raw_turns(db, key, root.id, TurnRange(start_turn=0, end_turn=0), moment)
    found: list[StoredMessage] = []
    for stored in stored_models(rows, key.session_id):
        if not isinstance(stored.message, SystemMessage):
            break
        found.append(stored)
    return found


def _digest_and_loops_after(
    db: Connection,
    key: SessionKey,
    head: int,
    window: list[LoopRecord],
    complete: bool,
    overlay: str,
    moment: datetime | None,
) -> tuple[SessionDigest | None, list[LoopRecord]]:
    """Return the chain's newest digest and the loops after the ones it folds.

    A digest is the chain's when the loop that was current when it was written is in
    the chain. The window read for the scope is searched first; a longer chain is read
    whole only when the session has digests of this overlay and none is in the window.
    """
    digest = newest_digest(db, key, overlay, [loop.id for loop in window], moment)
    loops = window
    if digest is None and not complete:
        if newest_digest(db, key, overlay, None, moment) is None:
            return None, []
        loops, _ = chain_as_of(db, key, head, None, moment)
        digest = newest_digest(db, key, overlay, [loop.id for loop in loops], moment)
    if digest is None:
        return None, []
    ids = [loop.id for loop in loops]
    if digest.through_loop_id not in ids:
        loops, _ = chain_as_of(db, key, head, None, moment)
        ids = [loop.id for loop in loops]
    return digest, loops[ids.index(digest.through_loop_id) + 1 :]


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
    loops, _ = chain_as_of(db, key, head, None, None)
    ids = [loop.id for loop in loops]
    digest = newest_digest(db, key, overlay, ids, None)
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
    return _rows(
        db, sql.SELECT_HISTORY, {**key.params, "head": head}, key.session_id, decoded=decoded
    )


def chain_counts(db: Connection, key: SessionKey, head: int) -> tuple[array[int], array[int]]:
    """Return the ids and message counts of the chain ending at `head`, root first.

    Two flat arrays: a chain of a million loops takes 16 MB, not a million models.
    """
    ids, counts = array("q"), array("q")
    for loop_id, count in db.execute(sql.SELECT_CHAIN_COUNTS, {**key.params, "head": head}):
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
    index in it and a position in that loop. Each loop is read by the unique index
    `(session_id, loop_id, position)`, from the position reached, up to the count the
    loop had when the read began: messages appended since are not read, and every page
    is one short transaction.
    """
    visible_session(db, key)
    ids, counts = chain
    index, position = start
    page: list[StoredMessage] = []
    while index < len(ids) and len(page) < size:
        stop = min(counts[index], position + size - len(page))
        if position < stop:
            params = {**key.params, "lid": ids[index], "start": position, "stop": stop}
            page += _rows(db, sql.SELECT_LOOP_PAGE, params, key.session_id, decoded=decoded)
            position = stop
        if position >= counts[index]:
            index, position = index + 1, 0
    return page, (index, position)


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
        plain = read_plain(db, _micros_read(statement) if on_postgresql else statement, params)
    rows: Sequence[Any] = db.execute(statement, params).all() if plain is None else plain
    if newest_first:
        rows = rows[::-1]
    if decoded:
        driver = None if plain is None else db.dialect.name
        return decoded_models(rows, session_id, plain=driver)
    return stored_models(rows, session_id)


_MICROS_READS: dict[int, tuple[Any, Any]] = {}
_CREATED_AT = sql.MESSAGE_COLUMNS.index(sql.messages.c.created_at)


def _micros_read(statement: Any) -> Any:
    """The statement of the message columns with `created_at` as integer microseconds.

    For asyncpg's plain read (`read_plain`), which gets each value as the driver decodes
    it: a `timestamptz` becomes a new `datetime` a row, about 60% of what the eight
    columns beside the payload cost to decode, while a batch's messages share one time,
    which `decoded_records` turns into a `datetime` once (`utc_micros`). `EXTRACT` gives
    `numeric` (exact) from PostgreSQL 14, and a `double precision` before, whose error is
    a fraction of a microsecond at today's times, so the rounding cast is exact either
    way. Made once a statement (cached by identity; the statements are built once).
    """
    entry = _MICROS_READS.get(id(statement))
    if entry is None or entry[0] is not statement:
        columns = list(statement.selected_columns)
        micros = extract("epoch", columns[_CREATED_AT]) * literal_column("1000000")
        columns[_CREATED_AT] = cast(micros, BigInteger).label("created_at")
        entry = (statement, statement.with_only_columns(*columns))
        _MICROS_READS[id(statement)] = entry
    return entry[1]


def _raw_turns(
    db: Connection, key: SessionKey, loop_id: int, turns: TurnRange, as_of: datetime | None
) -> list[Row[Any]]:
    params = {**key.params, "lid": loop_id, "a": turns.start_turn, "b": turns.end_turn}
    if as_of is None:
        return list(db.execute(sql.SELECT_RAW_TURNS, params).all())
    return list(db.execute(sql.SELECT_RAW_TURNS_AS_OF, {**params, "t": as_of}).all())


def _latest_user(
    db: Connection, key: SessionKey, loop_ids: Sequence[int], as_of: datetime | None
) -> StoredMessage | None:
    """Return the newest raw user message of these loops (newest loop first)."""
    for loop_id in loop_ids:
        params: dict[str, Any] = {**key.params, "lid": loop_id}
        if as_of is None:
            row = db.execute(sql.SELECT_LATEST_USER, params).first()
        else:
            row = db.execute(sql.SELECT_LATEST_USER_AS_OF, {**params, "t": as_of}).first()
        if row is not None:
            return stored_model(row, key.session_id)
    return None
