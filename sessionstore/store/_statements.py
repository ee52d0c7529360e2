"""Pre-built statements: the store's hot paths, built once with bind parameters.

Building and hashing a statement costs SQLAlchemy about 100 µs, five times what SQLite
needs to run it, so every statement a hot path runs is built here, once, and run with
parameters. Statements that depend on a flag (tenant-scoped or not, one row or many)
are cached per flag.

Each is built on first use, not at import: a module attribute in capitals
(`sql.LOCK_SESSION`) is made by the builder of that name in lower case
(`_lock_session`) the first time it is read (PEP 562), then kept as a plain attribute;
so a command pays only for the statements it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    Select,
    Table,
    Text,
    bindparam,
    cast,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    text,
    type_coerce,
    update,
)

from sessionstore.store._nul import NulSafeJSONText

# The tables, re-exported: the units of work name them `sql.<table>`.
from sessionstore.store._tables import blocks as blocks
from sessionstore.store._tables import digests as digests
from sessionstore.store._tables import events as events
from sessionstore.store._tables import loops as loops
from sessionstore.store._tables import messages as messages
from sessionstore.store._tables import section_messages as section_messages
from sessionstore.store._tables import sections as sections
from sessionstore.store._tables import sessions as sessions
from sessionstore.store._tables import usage as usage

LOOP_COLUMNS = (
    loops.c.id,
    loops.c.session_id,
    loops.c.parent_loop_id,
    loops.c.sequence,
    loops.c.depth,
    loops.c.created_at,
    loops.c.closed_at,
    loops.c.message_count,
    loops.c.token_total,
    loops.c.turn_count,
)
"""The columns a `LoopRecord` is built from."""

MESSAGE_COLUMNS = (
    messages.c.id,
    messages.c.loop_id,
    messages.c.position,
    messages.c.turn_index,
    messages.c.token_count,
    messages.c.content_hash,
    messages.c.client_id,
    messages.c.created_at,
    # Read as text (a CAST, so asyncpg does not decode JSONB either): pydantic-core
    # parses and validates it in one step, faster than json.loads and then validation.
    # On PostgreSQL the text's NUL encoding is undone (see _nul.py).
    type_coerce(cast(messages.c.payload, Text), NulSafeJSONText()).label("payload"),
)
"""The columns a `StoredMessage` is built from, in the order `stored_model` unpacks them."""

BLOCK_HEADER_COLUMNS = (
    blocks.c.id,
    blocks.c.session_id,
    blocks.c.loop_id,
    blocks.c.overlay,
    blocks.c.generation,
    blocks.c.keep_first_start,
    blocks.c.keep_first_end,
    blocks.c.strategy,
    blocks.c.config,
    blocks.c.tokens_before,
    blocks.c.tokens_after,
    blocks.c.created_at,
)

TENANT_WHERE = (
    sessions.c.app_name == bindparam("t_app"),
    sessions.c.user_id == bindparam("t_user"),
)


def keyed(table: Any) -> tuple[Any, ...]:
    """The conditions that scope `table` to one session: its key `(:sid, :app, :user)`.

    `session_id` (`id` of the sessions table) is the distribution column, so a statement
    with these conditions is routed to the one shard that holds the session.
    """
    sid = table.c.id if table is sessions else table.c.session_id
    return (
        sid == bindparam("sid"),
        table.c.app_name == bindparam("app"),
        table.c.user_id == bindparam("user"),
    )


SESSION_WHERE = keyed(sessions)

_T = TypeVar("_T")

_BUILDERS: dict[str, Callable[[], Any]] = {}


def _lazy(build: Callable[[], _T]) -> Callable[[], _T]:
    """Register `build` as the builder of the attribute named like it in capitals."""
    _BUILDERS[build.__name__.lstrip("_").upper()] = build
    return build


if TYPE_CHECKING:
    # What `__getattr__` builds, for the type checker (which then flags a misspelt name).
    LOCK_SESSION: Any
    LOCK_ONLY_SESSION: Any
    SELECT_SESSION: Any
    SELECT_SESSION_TENANTS: Any
    SELECT_LOOP: Any
    SELECT_LOOP_STATE: Any
    UPDATE_LOOP_COUNTERS: Any
    SELECT_RAW_TURNS: Any
    SELECT_RAW_TURNS_AS_OF: Any
    SELECT_RAW_LOOPS: Any
    SELECT_RAW_LOOPS_AS_OF: Any
    SELECT_LATEST_USER: Any
    SELECT_LATEST_USER_AS_OF: Any
    SELECT_TURN_BOUNDS: Any
    SELECT_LOOP_PAGE: Any
    SELECT_SECTIONS: Any
    SELECT_SECTION_MESSAGES: Any
    SELECT_APPENDED_INTO_TURNS: Select[tuple[Any]]
else:

    def __getattr__(name: str) -> Any:
        """Build a statement the first time it is read, and keep it (PEP 562)."""
        build = _BUILDERS.get(name)
        if build is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        # Two threads may both build it: equal statements, and the last one is kept.
        statement = globals()[name] = build()
        return statement


@_lazy
def _lock_session() -> Any:
    """Bump a session's version, which takes its write lock, and return its state."""
    return (
        update(sessions)
        .where(*SESSION_WHERE)
        .values(version=sessions.c.version + 1, updated_at=bindparam("now"))
        .returning(sessions.c.version, sessions.c.active_loop_id, sessions.c.loop_count)
    )


@_lazy
def _lock_only_session() -> Any:
    """`LOCK_SESSION`, only if no other tenant has a session of the same id.

    For the unscoped store, which names a session by its id alone: one statement where
    the tenant look-up (`SELECT_SESSION_TENANTS`) and the lock were two. A row back means
    what the look-up would have found, one session of that id, with this key.
    """
    other = sessions.alias("other")
    return _lock_session().where(
        ~exists().where(
            other.c.id == bindparam("sid"),
            or_(other.c.app_name != bindparam("app"), other.c.user_id != bindparam("user")),
        )
    )


@_lazy
def _select_session() -> Any:
    return select(sessions).where(*SESSION_WHERE)


@_lazy
def _select_session_tenants() -> Any:
    """The tenants that use a session id (two at most: enough to tell one from several)."""
    return (
        select(sessions.c.app_name, sessions.c.user_id)
        .where(sessions.c.id == bindparam("sid"))
        .order_by(sessions.c.app_name, sessions.c.user_id)
        .limit(2)
    )


@cache
def insert_returning_id(table: Table, many: bool) -> Any:
    """Insert rows and return their ids (in parameter order when `many`)."""
    return insert(table).returning(table.c.id, sort_by_parameter_order=many)


@_lazy
def _select_loop() -> Any:
    return select(loops).where(loops.c.id == bindparam("lid"), *keyed(loops))


@_lazy
def _select_loop_state() -> Any:
    return select(
        loops.c.message_count,
        loops.c.token_total,
        loops.c.turn_count,
        loops.c.open_tool_call_ids,
        loops.c.closed_at,
    ).where(loops.c.id == bindparam("lid"), *keyed(loops))


@_lazy
def _update_loop_counters() -> Any:
    return (
        update(loops)
        .where(loops.c.id == bindparam("lid"), *keyed(loops))
        .values(
            message_count=loops.c.message_count + bindparam("n"),
            token_total=loops.c.token_total + bindparam("tokens"),
            turn_count=bindparam("turns"),
            open_tool_call_ids=bindparam("open_ids", type_=loops.c.open_tool_call_ids.type),
        )
    )


# Starting a loop (every user request of an SDK session starts one).
SELECT_LOOP_HEAD = select(loops.c.depth, loops.c.closed_at, loops.c.message_count).where(
    loops.c.id == bindparam("lid"), *keyed(loops)
)
CLOSE_OPEN_LOOP = (
    update(loops)
    .where(loops.c.id == bindparam("lid"), *keyed(loops), loops.c.closed_at.is_(None))
    .values(closed_at=bindparam("now"))
)
INSERT_LOOP = insert(loops).returning(loops.c.id)
ACTIVATE_LOOP = (
    update(sessions)
    .where(*SESSION_WHERE)
    .values(active_loop_id=bindparam("lid"), loop_count=bindparam("loops"))
)

# PostgreSQL: the messages and the loop's counters in one round trip (data-modifying
# CTEs), for any number of rows (arrays unnested, so the
# statement text never changes). `{go}` is empty, or the condition of the locking form below.
_PG_APPEND_CTES = """
inserted AS (
    INSERT INTO sessionstore_messages (session_id, app_name, user_id, loop_id, position,
        turn_index, kind, tool_call_id, tool_name, payload, token_count, content_hash,
        client_id, created_at, search_vector)
    SELECT :sid, :app, :user, :lid, r.position, r.turn_index, r.kind, r.tool_call_id, r.tool_name,
        CAST(r.payload AS JSON), r.token_count, r.content_hash, r.client_id, :created,
        coalesce(CAST(r.vector AS TSVECTOR), to_tsvector('simple'::regconfig, r.search_text))
    FROM unnest(CAST(:positions AS INTEGER[]), CAST(:turn_indexes AS INTEGER[]),
        CAST(:kinds AS VARCHAR[]), CAST(:tool_call_ids AS VARCHAR[]),
        CAST(:tool_names AS VARCHAR[]), CAST(:payloads AS TEXT[]),
        CAST(:token_counts AS INTEGER[]), CAST(:hashes AS BYTEA[]),
        CAST(:client_ids AS VARCHAR[]), CAST(:vectors AS TEXT[]),
        CAST(:search_texts AS TEXT[]))
        AS r(position, turn_index, kind, tool_call_id, tool_name, payload, token_count,
             content_hash, client_id, vector, search_text)
    {go_where}
    RETURNING id, position, turn_index
), counted AS (
    UPDATE sessionstore_loops
    SET message_count = message_count + :n, token_total = token_total + :tokens,
        turn_count = :turns, open_tool_call_ids = CAST(:open_ids AS JSONB)
    WHERE id = :lid AND session_id = :sid AND app_name = :app AND user_id = :user {go_and}
)"""

INSERT_MESSAGES_AND_COUNT = text(
    "WITH"
    + _PG_APPEND_CTES.format(go_where="", go_and="")
    + "\nSELECT id, position FROM inserted\n"
).bindparams(bindparam("created", type_=messages.c.created_at.type))

# PostgreSQL, an append whose loop state this store cached, as a transaction of its own:
# the session's write lock (`LOCK_SESSION`'s version bump) and the rows in one statement,
# sent without BEGIN and COMMIT, so the whole append is one round trip (in a transaction
# block it is three). The version is bumped and the rows written only if the cached state
# is current: the session is at the cached version and, unless the caller named the loop,
# that loop is still the active one; else nothing is written and no row is returned, and
# the append runs as usual in a transaction. The unscoped store's tenant is the cached one
# only while no other tenant uses the session id (see `session_key`).
LOCK_AND_INSERT_IF_CURRENT = text(
    """WITH locked AS (
    UPDATE sessionstore_sessions SET version = version + 1, updated_at = :created
    WHERE id = :sid AND app_name = :app AND user_id = :user AND version + 1 = :version
        AND (CAST(:named AS BOOLEAN) OR active_loop_id = :lid)
        AND (NOT CAST(:unscoped AS BOOLEAN)
             OR (SELECT count(*) FROM sessionstore_sessions WHERE id = :sid) = 1)
    RETURNING version, active_loop_id, loop_count
), go AS (
    SELECT 1 FROM locked
),"""
    + _PG_APPEND_CTES.format(
        go_where="WHERE EXISTS (SELECT FROM go)", go_and="AND EXISTS (SELECT FROM go)"
    )
    + """
SELECT l.version, l.active_loop_id, l.loop_count, i.id, i.position
FROM locked AS l JOIN inserted AS i ON TRUE
"""
).bindparams(bindparam("created", type_=messages.c.created_at.type))


def _raw_turns_where() -> tuple[Any, ...]:
    return (
        *keyed(messages),
        messages.c.loop_id == bindparam("lid"),
        messages.c.turn_index.between(bindparam("a"), bindparam("b")),
    )


@_lazy
def _select_raw_turns() -> Any:
    return select(*MESSAGE_COLUMNS).where(*_raw_turns_where()).order_by(messages.c.position)


@_lazy
def _select_raw_turns_as_of() -> Any:
    return (
        select(*MESSAGE_COLUMNS)
        .where(*_raw_turns_where(), messages.c.created_at <= bindparam("t"))
        .order_by(messages.c.position)
    )


def _raw_loops_where() -> tuple[Any, ...]:
    return (*keyed(messages), messages.c.loop_id.in_(bindparam("loops", expanding=True)))


@_lazy
def _select_raw_loops() -> Any:
    """Every message of the loops `:loops`, by loop and position (loops without a block)."""
    return (
        select(*MESSAGE_COLUMNS)
        .where(*_raw_loops_where())
        .order_by(messages.c.loop_id, messages.c.position)
    )


@_lazy
def _select_raw_loops_as_of() -> Any:
    return (
        select(*MESSAGE_COLUMNS)
        .where(*_raw_loops_where(), messages.c.created_at <= bindparam("t"))
        .order_by(messages.c.loop_id, messages.c.position)
    )


def _user_where() -> tuple[Any, ...]:
    """Matches the partial index ix_sessionstore_messages_user (kind = 'user')."""
    return (
        *keyed(messages),
        messages.c.loop_id == bindparam("lid"),
        messages.c.kind == literal_column("'user'"),
    )


@_lazy
def _select_latest_user() -> Any:
    return (
        select(*MESSAGE_COLUMNS).where(*_user_where()).order_by(messages.c.position.desc()).limit(1)
    )


@_lazy
def _select_latest_user_as_of() -> Any:
    return (
        select(*MESSAGE_COLUMNS)
        .where(*_user_where(), messages.c.created_at <= bindparam("t"))
        .order_by(messages.c.position.desc())
        .limit(1)
    )


@_lazy
def _select_turn_bounds() -> Any:
    return (
        select(func.min(messages.c.position), func.max(messages.c.position))
        .where(*keyed(messages), messages.c.loop_id == bindparam("lid"))
        .group_by(messages.c.turn_index)
        .order_by(messages.c.turn_index)
    )


@cache
def select_blocks(by_overlay: bool) -> Any:
    """Select the blocks of one loop `:lid` (of one overlay `:overlay`, or all)."""
    stmt = select(blocks).where(*keyed(blocks), blocks.c.loop_id == bindparam("lid"))
    return stmt.where(blocks.c.overlay == bindparam("overlay")) if by_overlay else stmt


@cache
def select_digest_overlay() -> Any:
    """Select the overlay of one of a session's digests, `:id`."""
    return select(digests.c.overlay).where(*keyed(digests), digests.c.id == bindparam("id"))


@cache
def select_newest_digest(by_heads: bool, as_of: bool) -> Any:
    """Select a session's newest digest of an overlay (at some heads, written by a time)."""
    columns = digests.c
    # `folded` as text: the digest decodes it when it is first used (see `digest_model`).
    shown = [
        cast(column, Text).label("folded") if column is columns.folded else column
        for column in columns
    ]
    stmt = select(*shown).where(*keyed(digests), columns.overlay == bindparam("overlay"))
    if by_heads:
        stmt = stmt.where(columns.head_loop_id.in_(bindparam("heads", expanding=True)))
    if as_of:
        stmt = stmt.where(columns.created_at <= bindparam("t"))
    return stmt.order_by(columns.id.desc()).limit(1)


@cache
def select_loop_messages(active: bool, newest: bool) -> Any:
    """Select a loop's messages in one statement, only if the session is visible.

    With `active`, the loop is the session's active loop (`:sid`); else it is `:lid`.
    With `newest`, the newest `:n` messages, newest first; else all of them, in order.
    No row means an empty loop, or a session, loop or tenant that does not match: the
    caller tells those apart with the usual checks, off the hot path.
    """
    columns = messages.c
    if active:
        visible = select(sessions.c.active_loop_id).where(*SESSION_WHERE)
        where = (*keyed(messages), columns.loop_id == visible.scalar_subquery())
    else:
        # The key scopes the rows to the session (and its tenant): no visibility subquery.
        where = (*keyed(messages), columns.loop_id == bindparam("lid"))
    stmt = select(*MESSAGE_COLUMNS).where(*where)
    if newest:
        return stmt.order_by(columns.position.desc()).limit(bindparam("n"))
    return stmt.order_by(columns.position)


@cache
def select_loop_messages_by_id(active: bool, newest: bool) -> Any:
    """`select_loop_messages` for a store that knows the session's id only (the unscoped one).

    The rows of the session `:sid`'s loop, returned only when exactly one tenant uses the
    id, so the read needs no tenant lookup before it: no row means an empty loop, a
    session or loop that does not match, or an id several tenants use, which the caller
    then tells apart by looking the tenant up and reading as usual. The tenant's columns
    are bound by uncorrelated subqueries (each run once a statement), so the rows are
    found by the session's position key, in order, as with the key bound.
    """
    tenants = sessions.alias("tenants")
    unique = (
        select(func.count())
        .select_from(tenants)
        .where(tenants.c.id == bindparam("sid"))
        .scalar_subquery()
        == 1
    )

    def of_session(column: Any) -> Any:
        """A column of the one session with the id (NULL when not exactly one has it)."""
        return select(column).where(sessions.c.id == bindparam("sid"), unique).scalar_subquery()

    columns = messages.c
    where = (
        columns.session_id == bindparam("sid"),
        columns.app_name == of_session(sessions.c.app_name),
        columns.user_id == of_session(sessions.c.user_id),
        columns.loop_id == (of_session(sessions.c.active_loop_id) if active else bindparam("lid")),
    )
    stmt = select(*MESSAGE_COLUMNS).where(*where)
    if newest:
        return stmt.order_by(columns.position.desc()).limit(bindparam("n"))
    return stmt.order_by(columns.position)


@_lazy
def _select_loop_page() -> Any:
    """The messages of a loop at positions `[:start, :stop)`, in order (a keyset page)."""
    return (
        select(*MESSAGE_COLUMNS)
        .where(
            *keyed(messages),
            messages.c.loop_id == bindparam("lid"),
            messages.c.position >= bindparam("start"),
            messages.c.position < bindparam("stop"),
        )
        .order_by(messages.c.position)
    )


@cache
def select_block_rows(as_of: bool) -> Any:
    """Select the blocks of an overlay (`:overlay`) of some loops (`:loops`), by a time."""
    columns = blocks.c
    stmt = select(blocks).where(
        *keyed(blocks),
        columns.loop_id.in_(bindparam("loops", expanding=True)),
        columns.overlay == bindparam("overlay"),
    )
    return stmt.where(columns.created_at <= bindparam("t")) if as_of else stmt


@_lazy
def _select_sections() -> Any:
    return select(sections).where(
        *keyed(sections),
        sections.c.block_id.in_(bindparam("blocks", expanding=True)),
    )


@_lazy
def _select_section_messages() -> Any:
    return (
        select(
            section_messages.c.id,
            section_messages.c.section_id,
            # As text: pydantic-core parses and validates the message in one step.
            type_coerce(cast(section_messages.c.payload, Text), NulSafeJSONText()).label("payload"),
            section_messages.c.token_count,
            section_messages.c.covers,
        )
        .where(
            *keyed(section_messages),
            section_messages.c.section_id.in_(bindparam("sections", expanding=True)),
        )
        .order_by(section_messages.c.section_id, section_messages.c.position)
    )


# A message past the first :n of a loop in a turn up to :t: a block built from the first :n
# would stand for that turn without it (`_blocks.check_unchanged`).
@_lazy
def _select_appended_into_turns() -> Any:
    return (
        select(literal_column("1"))
        .select_from(messages)
        .where(
            *keyed(messages),
            messages.c.loop_id == bindparam("lid"),
            messages.c.position >= bindparam("n"),
            messages.c.turn_index <= bindparam("t"),
        )
        .limit(1)
    )
