"""Units of work on sessions and loops: each a sync function of a `Connection`.

They run inside a transaction the facade opened. Every write starts with `lock`, which
bumps the session's `version` with an `UPDATE ... RETURNING` and so takes the session's
write lock (a row lock on PostgreSQL, the database write lock on SQLite): concurrent
writers to one session queue up instead of interleaving.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Dialect, Select, and_, insert, or_, select, tuple_, update
from sqlalchemy.exc import IntegrityError

from sessionstore import _context_source as source
from sessionstore._context_source import SessionKey, check_session_id, key_from_tenants
from sessionstore._sqlite_read import decode_cursor, session_page
from sessionstore.errors import (
    LoopNotFoundError,
    SessionExistsError,
    SessionNotFoundError,
    StaleWriteError,
)
from sessionstore.models import (
    APP_NAME_MAX_LENGTH,
    SESSION_ID_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
    LoopRecord,
    Page,
)
from sessionstore.models._limits import check_json, check_text
from sessionstore.store import _statements as sql
from sessionstore.store._plain import insert_plain, rows_of, run_plain
from sessionstore.store._source import StoreSource

__all__ = [
    "Locked",
    "LoopHead",
    "SessionKey",
    "Tenant",
    "bound_time",
    "chain",
    "check_session_id",
    "check_tenant",
    "check_version",
    "close_loop",
    "delete_session",
    "delete_session_rows",
    "insert_session",
    "list_loops",
    "list_sessions",
    "listing_statement",
    "lock",
    "loop_head",
    "loop_row",
    "new_session_values",
    "now",
    "resolve_loop",
    "session_key",
    "start_loop",
    "switch_loop",
    "visible_session",
]


def now() -> datetime:
    """The current time, aware UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Tenant:
    """The `(app_name, user_id)` a store handle is scoped to."""

    app_name: str
    user_id: str

    def __post_init__(self) -> None:
        check_tenant(self.app_name, self.user_id)

    @property
    def params(self) -> dict[str, str]:
        """The bind parameters of the tenant filter."""
        return {"t_app": self.app_name, "t_user": self.user_id}


def check_tenant(app_name: str | None, user_id: str | None) -> None:
    """Refuse an `app_name` or `user_id` no session can have (too long, not valid Unicode)."""
    if app_name is not None:
        check_text(app_name, "app_name", max_length=APP_NAME_MAX_LENGTH)
    if user_id is not None:
        check_text(user_id, "user_id", max_length=USER_ID_MAX_LENGTH)


def _params(tenant: Tenant | None) -> dict[str, str]:
    return {} if tenant is None else tenant.params


def session_key(db: Connection, tenant: Tenant | None, session_id: str) -> SessionKey:
    """Return the key of the session a call names.

    A tenant handle names its tenant: the key is known without a query (whether the
    session exists is then checked by the statements, which are all scoped by the key).
    The unscoped store names an id only: the tenant is looked up by the id, on the one
    shard that holds every session of that id; an id several tenants use is ambiguous.
    """
    check_session_id(session_id)
    if tenant is not None:
        return SessionKey(session_id, tenant.app_name, tenant.user_id)
    params = {"sid": session_id}
    # On SQLite straight on the driver: this runs before every call of the unscoped store.
    return key_from_tenants(session_id, rows_of(db, sql.SELECT_SESSION_TENANTS, params))


@dataclass(frozen=True, slots=True)
class Locked:
    """What the version-bumping UPDATE of a session returns."""

    version: int
    active_loop_id: int | None
    loop_count: int


def lock(db: Connection, key: SessionKey, moment: datetime) -> Locked:
    """Bump the session's version (taking its write lock) and return its state."""
    statement = sql.LOCK_SESSION
    params = {"now": moment, **key.params}
    # On SQLite straight on the driver (the hot path of every append): the time bound ready.
    rows = rows_of(db, statement, params, {**params, "now": bound_time(db, moment)})
    row = rows[0] if rows else None
    if row is None:
        raise SessionNotFoundError(key.session_id)
    return Locked(row[0], row[1], row[2])


def check_version(session_id: str, locked: Locked, expected: int | None) -> None:
    """Refuse the write unless the session was at version `expected` (when given)."""
    # The lock has already bumped the version: the stored one was one less.
    if expected is not None and locked.version - 1 != expected:
        raise StaleWriteError(session_id, expected=expected, actual=locked.version - 1)


def visible_session(db: Connection, key: SessionKey) -> Any:
    """Return the session's row; raise `SessionNotFoundError` if there is none."""
    return source.visible_session(StoreSource(db), key)


def loop_row(db: Connection, key: SessionKey, loop_id: int) -> Any:
    """Return a loop's row; raise `LoopNotFoundError` if it is not a loop of the session."""
    return source.loop_row(StoreSource(db), key, loop_id)


def resolve_loop(db: Connection, key: SessionKey, loop_id: int | None) -> int | None:
    """Return `loop_id` (checked to be in the session) or the session's active loop."""
    return source.resolve_loop(StoreSource(db), key, loop_id)


# ── sessions ────────────────────────────────────────────────────────────────────


def new_session_values(
    tenant: Tenant | None,
    *,
    session_id: str | None,
    app_name: str | None,
    user_id: str | None,
    title: str | None,
    metadata: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Return the row of a new session, owned by the handle's tenant or the given one."""
    if tenant is not None:
        if (app_name or tenant.app_name, user_id or tenant.user_id) != (
            tenant.app_name,
            tenant.user_id,
        ):
            raise ValueError("a tenant-scoped handle creates sessions for its own tenant only")
        app_name, user_id = tenant.app_name, tenant.user_id
    elif not app_name or not user_id:
        raise ValueError("app_name and user_id are required on an unscoped store")
    check_tenant(app_name, user_id)
    if session_id is None:
        session_id = uuid.uuid4().hex
    elif not 0 < len(session_id) <= SESSION_ID_MAX_LENGTH:
        raise ValueError(f"session_id must be 1 to {SESSION_ID_MAX_LENGTH} characters")
    check_session_id(session_id)
    if title is not None:
        check_text(title, "title", max_length=TITLE_MAX_LENGTH)
    metadata = check_json(dict(metadata or {}), "metadata")
    moment = now()
    return {
        "id": session_id,
        "app_name": app_name,
        "user_id": user_id,
        "title": title,
        "metadata": metadata,
        "active_loop_id": None,
        "version": 1,
        "loop_count": 0,
        "created_at": moment,
        "updated_at": moment,
    }


def insert_session(db: Connection, values: Mapping[str, Any]) -> None:
    """Insert a session row; raise `SessionExistsError` if its tenant already uses its id."""
    try:
        db.execute(insert(sql.sessions), values)
    except IntegrityError as exc:
        # The key (id, app_name, user_id) is the table's only unique key: another tenant's
        # use of the id is no conflict, so this reveals nothing about other tenants.
        raise SessionExistsError(values["id"]) from exc


def listing_statement(
    tenant: Tenant | None,
    *,
    limit: int,
    cursor: str | None,
    app_name: str | None,
    user_id: str | None,
) -> Select[Any]:
    """The statement of one page of sessions, newest first, and one row more.

    The extra row tells whether a next page follows. `_sqlite_read` keeps this
    statement's SQLite text for a first page (a test holds the two equal).
    """
    columns = sql.sessions.c
    filters: list[Any] = list(sql.TENANT_WHERE) if tenant is not None else []
    if tenant is None:
        if app_name is not None:
            filters.append(columns.app_name == app_name)
        if user_id is not None:
            filters.append(columns.user_id == user_id)
    if cursor is not None:
        created_at, last = decode_cursor(cursor)
        # Ids are per tenant: the tenant breaks a tie of time and id (a total order).
        after = [columns.id, columns.app_name, columns.user_id][: len(last)]
        filters.append(
            or_(
                columns.created_at < created_at,
                and_(columns.created_at == created_at, tuple_(*after) < tuple_(*last)),
            )
        )
    return (
        select(sql.sessions)
        .where(*filters)
        .order_by(
            columns.created_at.desc(),
            columns.id.desc(),
            columns.app_name.desc(),
            columns.user_id.desc(),
        )
        .limit(limit + 1)
    )


def list_sessions(
    db: Connection,
    tenant: Tenant | None,
    *,
    limit: int,
    cursor: str | None,
    app_name: str | None,
    user_id: str | None,
) -> Page:
    """Return one page of sessions, newest first (see `SessionStore.list_sessions`)."""
    stmt = listing_statement(tenant, limit=limit, cursor=cursor, app_name=app_name, user_id=user_id)
    rows = db.execute(stmt, _params(tenant)).all()
    return session_page([row._mapping for row in rows], limit)


def delete_session(db: Connection, key: SessionKey) -> None:
    """Delete a session; its loops, messages and blocks go with it (cascade)."""
    lock(db, key, now())
    delete_session_rows(db, *sql.SESSION_WHERE, params=key.params)


def delete_session_rows(
    db: Connection, *where: Any, params: Mapping[str, Any] | None = None
) -> list[str]:
    """Delete the session rows matching `where` and return their ids.

    Every other row of those sessions, in every table, goes with them (ON DELETE CASCADE):
    this is the one way the store deletes anything (`delete_session`, retention).
    """
    stmt = sql.sessions.delete().where(*where).returning(sql.sessions.c.id)
    return list(db.execute(stmt, dict(params or {})).scalars())


# ── loops ───────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class LoopHead:
    """What starting a loop after a loop needs to know of it."""

    depth: int
    is_open: bool
    message_count: int

    @property
    def is_empty_open(self) -> bool:
        """Whether the loop is open and holds no message yet."""
        return self.is_open and not self.message_count


def loop_head(db: Connection, key: SessionKey, loop_id: int) -> LoopHead:
    """Return a loop's `LoopHead`; raise `LoopNotFoundError` if it is not a loop of the session."""
    params = {"lid": loop_id, **key.params}
    rows = rows_of(db, sql.SELECT_LOOP_HEAD, params)
    if not rows:
        raise LoopNotFoundError(loop_id, session_id=key.session_id)
    depth, closed_at, message_count = rows[0]
    return LoopHead(depth, closed_at is None, message_count)


_LOOP_INSERT_COLUMNS = (
    "session_id",
    "app_name",
    "user_id",
    "parent_loop_id",
    "sequence",
    "depth",
    "created_at",
    "closed_at",
    "message_count",
    "token_total",
    "turn_count",
    "open_tool_call_ids",
)


def start_loop(
    db: Connection,
    key: SessionKey,
    parent_loop_id: int | None,
    sequence: int,
    moment: datetime,
    *,
    parent: LoopHead | None = None,
) -> LoopRecord:
    """Insert loop number `sequence` after `parent_loop_id` and make it the active loop.

    The parent is closed. The caller holds the session's lock (`lock`). `parent`: the
    parent's head, when the caller has read it in this transaction.
    """
    depth = 0
    # Pre-built statements, on SQLite straight on the driver with bind-ready values: an
    # SDK session starts a loop for each user request, so this is an append's hot path.
    bound = bound_time(db, moment)
    if parent_loop_id is not None:
        if parent is None:
            parent = loop_head(db, key, parent_loop_id)
        depth = parent.depth + 1
        if parent.is_open:
            params = {"lid": parent_loop_id, **key.params}
            if run_plain(db, sql.CLOSE_OPEN_LOOP, {**params, "now": bound}) is None:
                db.execute(sql.CLOSE_OPEN_LOOP, {**params, "now": moment})
    values = (key.session_id, key.app_name, key.user_id, parent_loop_id, sequence, depth)
    ids = insert_plain(db, sql.loops, _LOOP_INSERT_COLUMNS, [(*values, bound, None, 0, 0, 0, "[]")])
    if ids is None:
        row: dict[str, Any] = dict(
            zip(_LOOP_INSERT_COLUMNS, (*values, moment, None, 0, 0, 0, []), strict=True)
        )
        ids = [db.execute(sql.INSERT_LOOP, row).scalar_one()]
    params = {"lid": ids[0], "loops": sequence + 1, **key.params}
    if run_plain(db, sql.ACTIVATE_LOOP, params) is None:
        db.execute(sql.ACTIVATE_LOOP, params)
    return LoopRecord(
        id=ids[0],
        session_id=key.session_id,
        parent_loop_id=parent_loop_id,
        sequence=sequence,
        depth=depth,
        created_at=moment,
        closed_at=None,
        message_count=0,
        token_total=0,
        turn_count=0,
    )


_TIME_BINDERS: WeakKeyDictionary[Dialect, Callable[[Any], Any] | None] = WeakKeyDictionary()


def bound_time(db: Connection, moment: datetime) -> Any:
    """`moment` as the time columns bind it, for statements run straight on the driver.

    Every time column has the same type; its bind processor is looked up once a dialect
    (SQLAlchemy builds a new one at each lookup).
    """
    dialect = db.dialect
    try:
        process = _TIME_BINDERS[dialect]
    except KeyError:
        column_type = sql.loops.c.created_at.type
        process = _TIME_BINDERS[dialect] = column_type.dialect_impl(dialect).bind_processor(dialect)
    return moment if process is None else process(moment)


def close_loop(db: Connection, key: SessionKey, loop_id: int, moment: datetime) -> Any:
    """Close a loop (if open) and return its row."""
    loop_row(db, key, loop_id)
    columns = sql.loops.c
    db.execute(
        update(sql.loops)
        .where(columns.id == loop_id, *sql.keyed(sql.loops), columns.closed_at.is_(None))
        .values(closed_at=moment),
        key.params,
    )
    return loop_row(db, key, loop_id)


def switch_loop(db: Connection, key: SessionKey, loop_id: int) -> None:
    """Make `loop_id` the session's active loop."""
    loop_row(db, key, loop_id)
    db.execute(
        update(sql.sessions).where(*sql.SESSION_WHERE).values(active_loop_id=loop_id),
        key.params,
    )


def list_loops(db: Connection, key: SessionKey) -> list[LoopRecord]:
    """Return every loop of a session, in order of creation."""
    return source.list_loops(StoreSource(db), key)


def chain(db: Connection, key: SessionKey, head: int, limit: int | None) -> list[LoopRecord]:
    """Return the chain of loops ending at `head`, root first (the newest `limit` of them)."""
    return source.chain(StoreSource(db), key, head, limit)
