"""The SQL schema as SQLAlchemy 2 typed rows, and the conversions between rows and models.

A session is keyed by `(id, app_name, user_id)`: its id is unique within its tenant only.
Every other table carries that key (`session_id`, `app_name`, `user_id`), and every primary
key, unique constraint and foreign key includes it, so every table can be distributed by
`session_id` (the distribution column: a call naming a session id reaches one shard) and
colocated with the others; every query the store makes about a session is scoped by the
key. The schema itself is created only by the alembic migrations in `migrations/`; this
module describes it for queries and for the test that compares the two.

Every column that references a loop, block, section or message is indexed (`index=True`,
or among the leading columns of another index: migration 0010), so deleting a session,
which cascades to all of them, costs a look-up per row instead of a scan (migration 0007,
which on SQLite also detaches a session's loops from each other before the cascade, so no
chain is deleted recursively; 0008 makes that trigger find the loops by the session's
whole key).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, ClassVar, cast

from sqlalchemy import (
    BigInteger,
    DateTime,
    Dialect,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.ext.asyncio import AsyncAttrs
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from sessionstore.models import (
    APP_NAME_MAX_LENGTH,
    CLIENT_ID_MAX_LENGTH,
    MESSAGE_ADAPTER,
    OVERLAY_MAX_LENGTH,
    SESSION_ID_MAX_LENGTH,
    STRATEGY_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    TOOL_ID_MAX_LENGTH,
    TOOL_NAME_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
    CompactedSection,
    CompactionBlock,
    CompactionEvent,
    CompactionSummaryMessage,
    LoopRecord,
    ReplacementMessage,
    Session,
    SessionDigest,
    StoredMessage,
    TurnRange,
)
from sessionstore.models._limits import STORED
from sessionstore.models._records import decoded_records
from sessionstore.store._hex_digest import HexDigest
from sessionstore.store._nul import NulSafeJSON, NulSafeString

__all__ = [
    "KEY_COLUMNS",
    "Base",
    "BlockRow",
    "CompactionEventRow",
    "DigestRow",
    "LoopRow",
    "MessageRow",
    "SectionMessageRow",
    "SectionRow",
    "SessionRow",
    "UTCDateTime",
    "UsageRow",
    "block_model",
    "decoded_models",
    "digest_model",
    "event_model",
    "include_object",
    "loop_model",
    "replacement_from_text",
    "replacement_model",
    "session_model",
    "stored_model",
    "stored_models",
    "table_of",
]

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
}

# JSON on SQLite, JSONB on PostgreSQL, where NUL characters are encoded (see _nul.py).
JSONPayload = NulSafeJSON()
# Every string column is a NulSafeString (VARCHAR, with NUL encoded on PostgreSQL), sized by
# the limits the models and the store check before writing (`sessionstore.models`), so no
# backend refuses what another accepts.
SessionId = NulSafeString(SESSION_ID_MAX_LENGTH)
# SQLite only auto-increments an INTEGER PRIMARY KEY, which is 64-bit there anyway.
Id = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime that survives SQLite, which stores no time zone.

    Naive datetimes are refused on the way in; values read back are always aware UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive datetimes; store UTC (without an offset on SQLite)."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: sessionstore stores aware UTC datetimes only")
        value = value.astimezone(UTC)
        # SQLite compares the stored text, so every value is written in one offset-free form.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return an aware UTC datetime."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        """On SQLite, parse the stored text straight to an aware datetime (memoised).

        A bulk read of messages holds a few distinct times (one per append call), so
        most values are a cache hit instead of a regular-expression parse and a copy.
        """
        if dialect.name == "sqlite":
            return _sqlite_utc
        return super().result_processor(dialect, coltype)


@lru_cache(maxsize=4096)
def _sqlite_utc(value: str | None) -> datetime | None:
    """Parse a time as SQLAlchemy stores it on SQLite (UTC, no offset) to an aware datetime."""
    if value is None:
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


class Base(AsyncAttrs, DeclarativeBase):
    """Declarative base with stable constraint names, for alembic."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSONPayload,
    }


KEY_COLUMNS = ("session_id", "app_name", "user_id")
"""A session's key as the other tables carry it; `session_id` is the distribution column."""

_SESSIONS = "sessionstore_sessions"


def _session_fk() -> ForeignKeyConstraint:
    """The key's foreign key to its session (named `fk_<table>_session_id`)."""
    return ForeignKeyConstraint(
        list(KEY_COLUMNS),
        [f"{_SESSIONS}.id", f"{_SESSIONS}.app_name", f"{_SESSIONS}.user_id"],
        ondelete="CASCADE",
    )


def _keyed_fk(column: str, target: str) -> ForeignKeyConstraint:
    """A foreign key to a row of the same session (named `fk_<table>_<column>`)."""
    return ForeignKeyConstraint(
        [column, *KEY_COLUMNS],
        [f"{target}.id", *(f"{target}.{name}" for name in KEY_COLUMNS)],
        ondelete="CASCADE",
    )


def _keyed_pk() -> PrimaryKeyConstraint:
    """A row's id with its session's key.

    On SQLite, which numbers only a one-column INTEGER PRIMARY KEY, the table keeps `id`
    as its primary key and a unique constraint on these columns (`uq_<table>_sqlite_key`)
    is what foreign keys reference; PostgreSQL (and Citus) have this key itself.
    """
    return PrimaryKeyConstraint("id", *KEY_COLUMNS)


def _keyed_unique(table: str, name: str, *columns: str) -> UniqueConstraint:
    """A unique constraint within a session: `columns` with the session's key first."""
    return UniqueConstraint(*KEY_COLUMNS, *columns, name=f"uq_{table}_{name}")


def _app_name() -> Any:
    return mapped_column(NulSafeString(APP_NAME_MAX_LENGTH))


def _user_id() -> Any:
    return mapped_column(NulSafeString(USER_ID_MAX_LENGTH))


class SessionRow(Base):
    """One agent session, owned by a tenant."""

    __tablename__ = "sessionstore_sessions"
    __table_args__ = (
        Index("ix_sessionstore_sessions_tenant", "app_name", "user_id", "created_at", "id"),
        Index("ix_sessionstore_sessions_created", "created_at", "id"),
        PrimaryKeyConstraint("id", "app_name", "user_id"),
    )

    id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = mapped_column(NulSafeString(APP_NAME_MAX_LENGTH))
    user_id: Mapped[str] = mapped_column(NulSafeString(USER_ID_MAX_LENGTH))
    title: Mapped[str | None] = mapped_column(NulSafeString(TITLE_MAX_LENGTH))
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata")
    # No foreign key: sessions and loops would reference each other; the store keeps it valid.
    active_loop_id: Mapped[int | None] = mapped_column(Id)
    version: Mapped[int] = mapped_column(Integer)
    loop_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class LoopRow(Base):
    """One agent run (LoopRecord), chained to its parent."""

    __tablename__ = "sessionstore_loops"
    __table_args__ = (
        _keyed_pk(),
        _keyed_unique("sessionstore_loops", "sequence", "sequence"),
        _session_fk(),
        _keyed_fk("parent_loop_id", "sessionstore_loops"),
        Index("ix_sessionstore_loops_parent", "session_id", "parent_loop_id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    session_id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = _app_name()
    user_id: Mapped[str] = _user_id()
    parent_loop_id: Mapped[int | None] = mapped_column(Id, index=True)
    sequence: Mapped[int] = mapped_column(Integer)
    depth: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]
    closed_at: Mapped[datetime | None]
    message_count: Mapped[int] = mapped_column(Integer)
    token_total: Mapped[int] = mapped_column(BigInteger)
    turn_count: Mapped[int] = mapped_column(Integer)
    # The call ids of the assistant message that opened the last turn, so a tool result
    # appended in a later batch can join that turn without re-reading the message.
    open_tool_call_ids: Mapped[list[str]] = mapped_column(JSONPayload)


class MessageRow(Base):
    """One raw message. Immutable: a trigger refuses every UPDATE."""

    __tablename__ = "sessionstore_messages"
    __table_args__ = (
        _keyed_pk(),
        # On SQLite `(loop_id, position)` alone (migration 0011): loop ids are unique there
        # and no shard needs the session's key in it.
        _keyed_unique("sessionstore_messages", "position", "loop_id", "position"),
        # No foreign key to the session (migration 0010): the loop's carries its key.
        _keyed_fk("loop_id", "sessionstore_loops"),
        # Only the messages that have one (migration 0010): most have none.
        Index(
            "uq_sessionstore_messages_client_id",
            *KEY_COLUMNS,
            "client_id",
            unique=True,
            sqlite_where=text("client_id IS NOT NULL"),
            postgresql_where=text("client_id IS NOT NULL"),
        ),
        # Also what the loop's foreign key is looked up by (loop ids are unique).
        Index("ix_sessionstore_messages_turn", "loop_id", "turn_index"),
        Index(
            "ix_sessionstore_messages_user",
            "loop_id",
            "position",
            sqlite_where=text("kind = 'user'"),
            postgresql_where=text("kind = 'user'"),
        ),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    session_id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = _app_name()
    user_id: Mapped[str] = _user_id()
    loop_id: Mapped[int] = mapped_column(Id)
    position: Mapped[int] = mapped_column(Integer)
    turn_index: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(NulSafeString(32))
    tool_call_id: Mapped[str | None] = mapped_column(NulSafeString(TOOL_ID_MAX_LENGTH))
    tool_name: Mapped[str | None] = mapped_column(NulSafeString(TOOL_NAME_MAX_LENGTH))
    payload: Mapped[dict[str, Any]]
    token_count: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(HexDigest())
    client_id: Mapped[str | None] = mapped_column(NulSafeString(CLIENT_ID_MAX_LENGTH))
    created_at: Mapped[datetime]
    search_text: Mapped[str | None] = mapped_column(Text)
    """PostgreSQL only: what full-text search indexes (`indexed_text`; NULL only in rows of
    older stores). SQLite derives it from the payload (the view `sessionstore_messages_search`,
    migration 0010)."""


class BlockRow(Base):
    """A compaction block: an overlay on one loop. Immutable once written."""

    __tablename__ = "sessionstore_blocks"
    __table_args__ = (
        _keyed_pk(),
        _keyed_unique("sessionstore_blocks", "generation", "loop_id", "overlay", "generation"),
        _session_fk(),
        _keyed_fk("loop_id", "sessionstore_loops"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    session_id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = _app_name()
    user_id: Mapped[str] = _user_id()
    loop_id: Mapped[int] = mapped_column(Id, index=True)
    overlay: Mapped[str] = mapped_column(NulSafeString(OVERLAY_MAX_LENGTH))
    generation: Mapped[int] = mapped_column(Integer)
    keep_first_start: Mapped[int | None] = mapped_column(Integer)
    keep_first_end: Mapped[int | None] = mapped_column(Integer)
    strategy: Mapped[str] = mapped_column(NulSafeString(STRATEGY_MAX_LENGTH))
    config: Mapped[dict[str, Any]]
    tokens_before: Mapped[int] = mapped_column(BigInteger)
    tokens_after: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime]


class SectionRow(Base):
    """A section of a block (`compacted` or `recent`) and the turn range it stands for."""

    __tablename__ = "sessionstore_block_sections"
    __table_args__ = (
        _keyed_pk(),
        _keyed_unique("sessionstore_block_sections", "kind", "block_id", "kind"),
        _session_fk(),
        _keyed_fk("block_id", "sessionstore_blocks"),
    )

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    session_id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = _app_name()
    user_id: Mapped[str] = _user_id()
    block_id: Mapped[int] = mapped_column(Id, index=True)
    kind: Mapped[str] = mapped_column(NulSafeString(16))
    start_turn: Mapped[int] = mapped_column(Integer)
    end_turn: Mapped[int] = mapped_column(Integer)


class SectionMessageRow(Base):
    """A replacement message of a section, with the ids of the raw messages it covers."""

    __tablename__ = "sessionstore_section_messages"
    __table_args__ = (
        _keyed_pk(),
        _keyed_unique("sessionstore_section_messages", "position", "section_id", "position"),
        _session_fk(),
        _keyed_fk("section_id", "sessionstore_block_sections"),
    )

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    session_id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = _app_name()
    user_id: Mapped[str] = _user_id()
    section_id: Mapped[int] = mapped_column(Id, index=True)
    position: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(NulSafeString(32))
    payload: Mapped[dict[str, Any]]
    token_count: Mapped[int] = mapped_column(Integer)
    covers: Mapped[list[int]] = mapped_column(JSONPayload)
    search_text: Mapped[str | None] = mapped_column(Text)
    """What full-text search indexes, as for raw messages."""


class CompactionEventRow(Base):
    """A compaction started or ended, with token estimates and duration."""

    __tablename__ = "sessionstore_compaction_events"
    __table_args__ = (
        _keyed_pk(),
        _session_fk(),
        _keyed_fk("loop_id", "sessionstore_loops"),
        _keyed_fk("block_id", "sessionstore_blocks"),
        Index("ix_sessionstore_compaction_events_session", "session_id", "id"),
    )

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    session_id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = _app_name()
    user_id: Mapped[str] = _user_id()
    loop_id: Mapped[int | None] = mapped_column(Id, index=True)
    block_id: Mapped[int | None] = mapped_column(Id, index=True)
    event: Mapped[str] = mapped_column(NulSafeString(16))
    tokens_before: Mapped[int] = mapped_column(BigInteger)
    tokens_after: Mapped[int | None] = mapped_column(BigInteger)
    duration_ms: Mapped[float | None] = mapped_column(Float)
    details: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]


class DigestRow(Base):
    """A session digest: the loops of a chain before a compaction's scope, summarised."""

    __tablename__ = "sessionstore_digests"
    __table_args__ = (
        _keyed_pk(),
        _session_fk(),
        _keyed_fk("head_loop_id", "sessionstore_loops"),
        _keyed_fk("through_loop_id", "sessionstore_loops"),
        Index("ix_sessionstore_digests_head", "session_id", "overlay", "head_loop_id", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    session_id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = _app_name()
    user_id: Mapped[str] = _user_id()
    overlay: Mapped[str] = mapped_column(NulSafeString(OVERLAY_MAX_LENGTH))
    head_loop_id: Mapped[int] = mapped_column(Id, index=True)
    through_loop_id: Mapped[int] = mapped_column(Id, index=True)
    folded: Mapped[list[list[int]]] = mapped_column(JSONPayload)
    payload: Mapped[dict[str, Any]]
    token_count: Mapped[int] = mapped_column(Integer)
    details: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]


class UsageRow(Base):
    """Provider usage of one model call (`record_usage`), on its loop and turn. Immutable.

    The usage an appended assistant message carries stays in its payload only (migration
    0011); the session's totals add both.
    """

    __tablename__ = "sessionstore_usage"
    __table_args__ = (
        _keyed_pk(),
        _keyed_unique("sessionstore_usage", "message_id", "message_id"),
        # No foreign key to the session (migration 0010): the loop's carries its key.
        _keyed_fk("loop_id", "sessionstore_loops"),
        # No foreign key to the message (migration 0011): an appended message's usage is
        # read from its payload, so `message_id` is set only in rows of older stores.
        Index("ix_sessionstore_usage_turn", "session_id", "loop_id", "turn_index"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, autoincrement=True)
    session_id: Mapped[str] = mapped_column(SessionId)
    app_name: Mapped[str] = _app_name()
    user_id: Mapped[str] = _user_id()
    # Looked up by ix_sessionstore_usage_turn and the message key (migration 0010).
    loop_id: Mapped[int] = mapped_column(Id)
    turn_index: Mapped[int] = mapped_column(Integer)
    # NULL: `record_usage` names no message (before migration 0011, an appended message's
    # usage was a row here too).
    message_id: Mapped[int | None] = mapped_column(Id)
    model: Mapped[str | None] = mapped_column(NulSafeString(255))
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger)
    reasoning_tokens: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime]


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Tell alembic's comparison to leave out the full-text search objects.

    Migration 0005 creates them per dialect (FTS5 tables and their shadow tables on
    SQLite, a generated `tsvector` column and its GIN index on PostgreSQL), which one
    dialect-neutral metadata cannot describe; so are the SQLite-only unique keys that
    stand in for the keyed primary keys there (see `_keyed_pk`), the raw messages'
    `search_text`, which only PostgreSQL stores (migration 0010), and SQLite's shorter
    position key of the raw messages (migration 0011).
    """
    name = name or ""
    if type_ == "column" and name == "search_text" and _table_name(obj) == _MESSAGES:
        return False  # PostgreSQL only (migration 0010)
    if type_ == "table":
        return not (name.endswith("_fts") or "_fts_" in name)
    if type_ == "column":
        return name != "search_vector"
    if type_ == "index":
        return not name.endswith("_search")
    if type_ == "unique_constraint":
        if name == _POSITION and _sqlite_position(obj, compare_to):
            return False  # SQLite's is (loop_id, position) alone (migration 0011)
        # SQLite only: what foreign keys reference there (see `_keyed_pk`).
        return not name.endswith("_sqlite_key")
    return True


_POSITION = "uq_sessionstore_messages_position"


def _sqlite_position(*constraints: object) -> bool:
    """Whether either side of a comparison is SQLite's short position key."""
    return any(
        [column.name for column in getattr(c, "columns", ())] == ["loop_id", "position"]
        for c in constraints
    )


_MESSAGES = "sessionstore_messages"


def _table_name(obj: object) -> str | None:
    table = getattr(obj, "table", None)
    return getattr(table, "name", None)


def table_of(row_class: type[Base]) -> Table:
    """Return the `Table` behind a row class, typed as one."""
    return cast(Table, row_class.__table__)


# ── row ↔ model ────────────────────────────────────────────────────────────────


def session_model(values: Mapping[Any, Any]) -> Session:
    """Build a `Session` from a sessions row's mapping (or the values it was inserted with)."""
    return Session(
        id=values["id"],
        app_name=values["app_name"],
        user_id=values["user_id"],
        title=values["title"],
        metadata=values["metadata"],
        active_loop_id=values["active_loop_id"],
        loop_count=values["loop_count"],
        version=values["version"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
    )


def loop_model(row: Any) -> LoopRecord:
    """Build a `LoopRecord` from a row with the loop columns."""
    return LoopRecord(
        id=row.id,
        session_id=row.session_id,
        parent_loop_id=row.parent_loop_id,
        sequence=row.sequence,
        depth=row.depth,
        created_at=row.created_at,
        closed_at=row.closed_at,
        message_count=row.message_count,
        token_total=row.token_total,
        turn_count=row.turn_count,
    )


def stored_model(row: Sequence[Any], session_id: str) -> StoredMessage:
    """Build a `StoredMessage` from a row of the store's message columns, in their order."""
    # Positional unpacking: faster than attribute access on a hot path.
    message_id, loop_id, position, turn_index, tokens, digest, client_id, created_at, payload = row
    return StoredMessage._from_columns(
        message_id,
        session_id,
        loop_id,
        position,
        turn_index,
        tokens,
        digest,
        created_at,
        payload,
        client_id,
    )


def stored_models(rows: Iterable[Sequence[Any]], session_id: str) -> list[StoredMessage]:
    """Build the `StoredMessage`s of many rows (their messages decoded when first used)."""
    build = StoredMessage._from_columns
    return [
        build(message_id, session_id, loop_id, position, turn, tokens, digest, at, payload, cid)
        for message_id, loop_id, position, turn, tokens, digest, cid, at, payload in rows
    ]


def decoded_models(
    rows: Iterable[Sequence[Any]], session_id: str, *, plain: bool = False
) -> list[StoredMessage]:
    """Build the `StoredMessage`s of many rows with their messages decoded now.

    For a read whose caller uses every message. `plain`: the rows come straight from the
    SQLite driver (`run_plain`), so the time is the stored text, parsed here.
    """
    return decoded_records(rows, session_id, _sqlite_utc if plain else None)  # type: ignore[arg-type]  # a stored time is never NULL


def replacement_model(row: Any) -> ReplacementMessage:
    """Build a `ReplacementMessage` from a section-messages row."""
    return ReplacementMessage.model_validate(
        {
            "message": MESSAGE_ADAPTER.validate_python(row.payload, context=STORED),
            "covers": row.covers,
            "token_count": row.token_count,
            "id": row.id,
        },
        context=STORED,
    )


def replacement_from_text(row: Any) -> ReplacementMessage:
    """Build a `ReplacementMessage` from a trusted row whose payload was read as JSON text."""
    return ReplacementMessage.model_construct(
        message=MESSAGE_ADAPTER.validate_json(row.payload, context=STORED),
        covers=row.covers,
        token_count=row.token_count,
        id=row.id,
    )


def block_model(row: Any, sections: Mapping[str, CompactedSection]) -> CompactionBlock:
    """Build a `CompactionBlock` from a blocks row and its sections by kind."""
    keep_first = None
    if row.keep_first_start is not None:
        keep_first = TurnRange(start_turn=row.keep_first_start, end_turn=row.keep_first_end)
    return CompactionBlock.model_validate(
        {
            "id": row.id,
            "session_id": row.session_id,
            "loop_id": row.loop_id,
            "overlay": row.overlay,
            "generation": row.generation,
            "keep_first": keep_first,
            "keep_compacted": sections.get("compacted"),
            "keep_recent": sections.get("recent"),
            "strategy": row.strategy,
            "config": row.config,
            "tokens_before": row.tokens_before,
            "tokens_after": row.tokens_after,
            "created_at": row.created_at,
        },
        context=STORED,
    )


def digest_model(row: Any) -> SessionDigest:
    """Build a `SessionDigest` from a digests row whose `folded` was read as JSON text.

    `folded` names every loop the digest stands for (thousands on a long chain); it is
    decoded the first time it is used, which a resume never does.
    """
    digest = SessionDigest.model_construct(
        id=row.id,
        session_id=row.session_id,
        overlay=row.overlay,
        head_loop_id=row.head_loop_id,
        through_loop_id=row.through_loop_id,
        message=CompactionSummaryMessage.model_validate(row.payload, context=STORED),
        token_count=row.token_count,
        details=row.details,
        created_at=row.created_at,
    )
    digest._pend(row.folded)
    return digest


def event_model(values: Mapping[Any, Any]) -> CompactionEvent:
    """Build a `CompactionEvent` from an events row's mapping."""
    return CompactionEvent.model_validate(dict(values), context=STORED)
