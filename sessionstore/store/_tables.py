"""The SQL schema as SQLAlchemy Core tables, and the conversions between rows and models.

A session is keyed by `(id, app_name, user_id)`: its id is unique within its tenant only.
Every other table carries that key (`session_id`, `app_name`, `user_id`), and every primary
key, unique constraint and foreign key includes it, so every table can be distributed by
`session_id` (the distribution column: a call naming a session id reaches one shard) and
colocated with the others; every query the store makes about a session is scoped by the
key. The schema itself is created only by the alembic migrations in `migrations/`; this
module describes it for queries and for the test that compares the two
(`schema_metadata`). The column types are in `_types`.

The tables are Core `Table`s, not ORM classes: the store only ever runs Core statements,
and declaring ORM classes costs a command's start time for nothing.

Every column that references a loop, block, section or message is indexed (`index=True`,
or among the leading columns of another index: migration 0010), so deleting a session,
which cascades to all of them, costs a look-up per row instead of a scan (migration 0007,
which on SQLite also detaches a session's loops from each other before the cascade, so no
chain is deleted recursively; 0008 makes that trigger find the loops by the session's
whole key).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
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

from sessionstore._row_models import block_model as block_model
from sessionstore._row_models import digest_model as digest_model
from sessionstore._row_models import loop_model as loop_model
from sessionstore._row_models import replacement_from_text as replacement_from_text
from sessionstore._row_models import replacement_model as replacement_model
from sessionstore._row_models import stored_model as stored_model
from sessionstore._row_models import stored_models as stored_models
from sessionstore._sqlite_read import session_model
from sessionstore.models import (
    APP_NAME_MAX_LENGTH,
    CLIENT_ID_MAX_LENGTH,
    OVERLAY_MAX_LENGTH,
    STRATEGY_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    TOOL_ID_MAX_LENGTH,
    TOOL_NAME_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
    CompactionEvent,
    StoredMessage,
)
from sessionstore.models._batch import RecordReading, decoded_records
from sessionstore.models._limits import STORED
from sessionstore.models._stored_json import shared_validator
from sessionstore.store._hex_digest import HexDigest
from sessionstore.store._nul import NulSafeString, unescape, unescape_json_text
from sessionstore.store._types import (
    Id,
    JSONPayload,
    MessagePayload,
    SessionId,
    UTCDateTime,
    sqlite_utc,
)

__all__ = [
    "KEY_COLUMNS",
    "LOOP_ID_INDEX",
    "block_model",
    "blocks",
    "decoded_models",
    "digest_model",
    "digests",
    "event_model",
    "events",
    "include_object",
    "loop_model",
    "loops",
    "messages",
    "metadata",
    "replacement_from_text",
    "replacement_model",
    "schema_metadata",
    "section_messages",
    "sections",
    "session_model",
    "sessions",
    "stored_model",
    "stored_models",
    "usage",
]

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""Every table, with stable constraint names for alembic (see `schema_metadata`)."""

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


def _key() -> tuple[Column[Any], ...]:
    """The session's key columns of a table that belongs to a session (after its `id`)."""
    return (
        Column("session_id", SessionId, nullable=False),
        Column("app_name", NulSafeString(APP_NAME_MAX_LENGTH), nullable=False),
        Column("user_id", NulSafeString(USER_ID_MAX_LENGTH), nullable=False),
    )


def _id() -> Column[int]:
    return Column("id", Id, autoincrement=True, nullable=False)


def _time(name: str, *, nullable: bool = False) -> Column[Any]:
    return Column(name, UTCDateTime(), nullable=nullable)


# One agent session, owned by a tenant.
sessions = Table(
    "sessionstore_sessions",
    metadata,
    Column("id", SessionId, nullable=False),
    Column("app_name", NulSafeString(APP_NAME_MAX_LENGTH), nullable=False),
    Column("user_id", NulSafeString(USER_ID_MAX_LENGTH), nullable=False),
    Column("title", NulSafeString(TITLE_MAX_LENGTH), nullable=True),
    Column("metadata", JSONPayload, nullable=False),
    # No foreign key: sessions and loops would reference each other; the store keeps it valid.
    Column("active_loop_id", Id, nullable=True),
    Column("version", Integer, nullable=False),
    Column("loop_count", Integer, nullable=False),
    _time("created_at"),
    _time("updated_at"),
    Index("ix_sessionstore_sessions_tenant", "app_name", "user_id", "created_at", "id"),
    Index("ix_sessionstore_sessions_created", "created_at", "id"),
    PrimaryKeyConstraint("id", "app_name", "user_id"),
)

# One agent run (LoopRecord), chained to its parent.
loops = Table(
    "sessionstore_loops",
    metadata,
    _id(),
    *_key(),
    # Indexed first in `ix_sessionstore_loops_parent` (migration 0017).
    Column("parent_loop_id", Id, nullable=True),
    Column("sequence", Integer, nullable=False),
    Column("depth", Integer, nullable=False),
    _time("created_at"),
    _time("closed_at", nullable=True),
    Column("message_count", Integer, nullable=False),
    Column("token_total", BigInteger, nullable=False),
    Column("turn_count", Integer, nullable=False),
    # The call ids of the assistant message that opened the last turn, so a tool result
    # appended in a later batch can join that turn without re-reading the message.
    Column("open_tool_call_ids", JSONPayload, nullable=False),
    _keyed_pk(),
    # The sequence second (PostgreSQL; migration 0017): a lookup by the session's key and
    # one more column (a loop's id, its parent) bounds only the session id through it,
    # so a planner without statistics does not take it for one row and read all the
    # session's loops; SQLite keeps 0008's order (alembic compares the columns as a set).
    UniqueConstraint(
        "session_id", "sequence", "app_name", "user_id", name="uq_sessionstore_loops_sequence"
    ),
    _session_fk(),
    _keyed_fk("parent_loop_id", "sessionstore_loops"),
    # A loop's children (the cascade of a deleted loop), with the session's key
    # (migration 0017).
    Index("ix_sessionstore_loops_parent", "parent_loop_id", *KEY_COLUMNS),
    sqlite_autoincrement=True,
)

# One raw message. Immutable: a trigger refuses every UPDATE.
messages = Table(
    "sessionstore_messages",
    metadata,
    _id(),
    *_key(),
    Column("loop_id", Id, nullable=False),
    Column("position", Integer, nullable=False),
    Column("turn_index", Integer, nullable=False),
    Column("kind", NulSafeString(32), nullable=False),
    Column("tool_call_id", NulSafeString(TOOL_ID_MAX_LENGTH), nullable=True),
    Column("tool_name", NulSafeString(TOOL_NAME_MAX_LENGTH), nullable=True),
    # `json` on PostgreSQL, not `jsonb`: read whole, as its text (migration 0014).
    Column("payload", MessagePayload, nullable=False),
    Column("token_count", Integer, nullable=False),
    Column("content_hash", HexDigest(), nullable=False),
    Column("client_id", NulSafeString(CLIENT_ID_MAX_LENGTH), nullable=True),
    _time("created_at"),
    # No search text: SQLite derives it from the payload (the view
    # `sessionstore_messages_search`, migration 0010); PostgreSQL's append writes the
    # `search_vector` (migration 0012, see `_search_vector`).
    _keyed_pk(),
    # On SQLite `(loop_id, position)` alone (migration 0011): loop ids are unique there
    # and no shard needs the session's key in it.
    _keyed_unique("sessionstore_messages", "position", "loop_id", "position"),
    # No foreign key to the session (migration 0010): the loop's carries its key.
    _keyed_fk("loop_id", "sessionstore_loops"),
    # Two partial indexes (on `client_id IS NOT NULL`, migration 0010, and on
    # `kind = 'user'`) are added by `schema_metadata`.
    # Also what the loop's foreign key is looked up by (loop ids are unique).
    Index("ix_sessionstore_messages_turn", "loop_id", "turn_index"),
    sqlite_autoincrement=True,
)

# A compaction block: an overlay on one loop. Immutable once written.
blocks = Table(
    "sessionstore_blocks",
    metadata,
    _id(),
    *_key(),
    Column("loop_id", Id, nullable=False, index=True),
    Column("overlay", NulSafeString(OVERLAY_MAX_LENGTH), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("keep_first_start", Integer, nullable=True),
    Column("keep_first_end", Integer, nullable=True),
    Column("strategy", NulSafeString(STRATEGY_MAX_LENGTH), nullable=False),
    Column("config", JSONPayload, nullable=False),
    Column("tokens_before", BigInteger, nullable=False),
    Column("tokens_after", BigInteger, nullable=False),
    _time("created_at"),
    _keyed_pk(),
    _keyed_unique("sessionstore_blocks", "generation", "loop_id", "overlay", "generation"),
    _session_fk(),
    _keyed_fk("loop_id", "sessionstore_loops"),
    sqlite_autoincrement=True,
)

# A section of a block (`compacted` or `recent`) and the turn range it stands for.
sections = Table(
    "sessionstore_block_sections",
    metadata,
    _id(),
    *_key(),
    Column("block_id", Id, nullable=False, index=True),
    Column("kind", NulSafeString(16), nullable=False),
    Column("start_turn", Integer, nullable=False),
    Column("end_turn", Integer, nullable=False),
    _keyed_pk(),
    _keyed_unique("sessionstore_block_sections", "kind", "block_id", "kind"),
    _session_fk(),
    _keyed_fk("block_id", "sessionstore_blocks"),
)

# A replacement message of a section, with the ids of the raw messages it covers.
section_messages = Table(
    "sessionstore_section_messages",
    metadata,
    _id(),
    *_key(),
    Column("section_id", Id, nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("kind", NulSafeString(32), nullable=False),
    Column("payload", JSONPayload, nullable=False),
    Column("token_count", Integer, nullable=False),
    Column("covers", JSONPayload, nullable=False),
    # What full-text search indexes, as for raw messages.
    Column("search_text", Text, nullable=True),
    _keyed_pk(),
    _keyed_unique("sessionstore_section_messages", "position", "section_id", "position"),
    _session_fk(),
    _keyed_fk("section_id", "sessionstore_block_sections"),
)

# A compaction started or ended, with token estimates and duration.
events = Table(
    "sessionstore_compaction_events",
    metadata,
    _id(),
    *_key(),
    Column("loop_id", Id, nullable=True, index=True),
    Column("block_id", Id, nullable=True, index=True),
    Column("event", NulSafeString(16), nullable=False),
    Column("tokens_before", BigInteger, nullable=False),
    Column("tokens_after", BigInteger, nullable=True),
    Column("duration_ms", Float, nullable=True),
    Column("details", JSONPayload, nullable=False),
    _time("created_at"),
    _keyed_pk(),
    _session_fk(),
    _keyed_fk("loop_id", "sessionstore_loops"),
    _keyed_fk("block_id", "sessionstore_blocks"),
    Index("ix_sessionstore_compaction_events_session", "session_id", "id"),
)

# A session digest: the loops of a chain before a compaction's scope, summarised.
digests = Table(
    "sessionstore_digests",
    metadata,
    _id(),
    *_key(),
    Column("overlay", NulSafeString(OVERLAY_MAX_LENGTH), nullable=False),
    Column("head_loop_id", Id, nullable=False, index=True),
    Column("through_loop_id", Id, nullable=False, index=True),
    # `[[loop_id, messages], ...]`: the loops this digest folded in, after those of the
    # digest it extends (`extends_id`, below).
    Column("folded", JSONPayload, nullable=False),
    Column("payload", JSONPayload, nullable=False),
    Column("token_count", Integer, nullable=False),
    Column("details", JSONPayload, nullable=False),
    _time("created_at"),
    # The digest of the same session this one extends (migration 0016; last, where the
    # migration adds it). NULL for the first, and for a digest written before 0016,
    # whose `folded` holds every loop it stands for.
    Column("extends_id", Id, nullable=True),
    _keyed_pk(),
    _session_fk(),
    _keyed_fk("head_loop_id", "sessionstore_loops"),
    _keyed_fk("through_loop_id", "sessionstore_loops"),
    Index("ix_sessionstore_digests_head", "session_id", "overlay", "head_loop_id", "id"),
    sqlite_autoincrement=True,
)

# Provider usage of one model call (`record_usage`), on its loop and turn. Immutable. The
# usage an appended assistant message carries stays in its payload only (migration 0011);
# the session's totals add both.
usage = Table(
    "sessionstore_usage",
    metadata,
    _id(),
    *_key(),
    # Looked up by ix_sessionstore_usage_turn and the message key (migration 0010).
    Column("loop_id", Id, nullable=False),
    Column("turn_index", Integer, nullable=False),
    # NULL: `record_usage` names no message (before migration 0011, an appended message's
    # usage was a row here too).
    Column("message_id", Id, nullable=True),
    Column("model", NulSafeString(255), nullable=True),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("reasoning_tokens", BigInteger, nullable=False),
    _time("created_at"),
    _keyed_pk(),
    _keyed_unique("sessionstore_usage", "message_id", "message_id"),
    # No foreign key to the session (migration 0010): the loop's carries its key.
    _keyed_fk("loop_id", "sessionstore_loops"),
    # No foreign key to the message (migration 0011): an appended message's usage is
    # read from its payload, so `message_id` is set only in rows of older stores.
    Index("ix_sessionstore_usage_turn", "session_id", "loop_id", "turn_index"),
    sqlite_autoincrement=True,
)


@cache
def schema_metadata() -> MetaData:
    """Return `metadata` with its three partial indexes: the whole schema.

    For what compares the metadata with the migrations or renders it (alembic's
    `env.py`, the tests). An index's `postgresql_where` makes SQLAlchemy import its
    PostgreSQL dialect (to check the argument), which a store on SQLite never needs;
    and the store runs no DDL. So these are added here, on first use, to the tables the
    store queries.
    """
    # A session's roots (migration 0017), which a resume probes for the one root: smaller
    # than any other index a planner without statistics could take for it.
    Index(
        "ix_sessionstore_loops_root",
        *(loops.c[name] for name in KEY_COLUMNS),
        sqlite_where=text("parent_loop_id IS NULL"),
        postgresql_where=text("parent_loop_id IS NULL"),
    )
    Index(
        "uq_sessionstore_messages_client_id",
        *(messages.c[name] for name in KEY_COLUMNS),
        messages.c.client_id,
        unique=True,
        sqlite_where=text("client_id IS NOT NULL"),
        postgresql_where=text("client_id IS NOT NULL"),
    )
    Index(
        "ix_sessionstore_messages_user",
        messages.c.loop_id,
        messages.c.position,
        sqlite_where=text("kind = 'user'"),
        postgresql_where=text("kind = 'user'"),
    )
    return metadata


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Tell alembic's comparison to leave out the full-text search objects.

    Migration 0005 creates them per dialect (FTS5 tables and their shadow tables on
    SQLite, a generated `tsvector` column and its GIN index on PostgreSQL), which one
    dialect-neutral metadata cannot describe (since 0012 PostgreSQL's `search_vector` of
    the raw messages is a plain column the append writes); so are the SQLite-only unique
    keys that stand in for the keyed primary keys there (see `_keyed_pk`), and SQLite's
    shorter position key of the raw messages (migration 0011).
    """
    name = name or ""
    if type_ == "table":
        return not (name.endswith("_fts") or "_fts_" in name)
    if type_ == "column":
        return name != "search_vector"
    if type_ == "index":
        # PostgreSQL only (migration 0015): SQLite's loop id is its rowid already.
        return not name.endswith("_search") and name != LOOP_ID_INDEX
    if type_ == "unique_constraint":
        if name == _POSITION and _sqlite_position(obj, compare_to):
            return False  # SQLite's is (loop_id, position) alone (migration 0011)
        # SQLite only: what foreign keys reference there (see `_keyed_pk`).
        return not name.endswith("_sqlite_key")
    return True


_POSITION = "uq_sessionstore_messages_position"

LOOP_ID_INDEX = "uq_sessionstore_loops_id"
"""PostgreSQL's unique index on the loops' `id` alone (migration 0015; not on Citus)."""


def _sqlite_position(*constraints: object) -> bool:
    """Whether either side of a comparison is SQLite's short position key."""
    return any(
        [column.name for column in getattr(c, "columns", ())] == ["loop_id", "position"]
        for c in constraints
    )


# ── row ↔ model ────────────────────────────────────────────────────────────────


def decoded_models(
    rows: Iterable[Sequence[Any]],
    session_id: str,
    *,
    plain: str | None = None,
    reading: RecordReading | None = None,
) -> list[StoredMessage]:
    """Build the `StoredMessage`s of many rows with their messages decoded now.

    For a read whose caller uses every message. `plain`: the dialect whose driver gave
    the rows straight (`read_plain`), so what the column types would do on the way out is
    done here: on SQLite the time is the stored text, parsed; on PostgreSQL it is integer
    microseconds since the epoch (the statement reads it so, see `_reads._rows`) and the
    strings are NUL-encoded (`_nul.py`). `reading`: see `decoded_records`.
    """
    if plain == "sqlite":
        return decoded_records(rows, session_id, sqlite_utc, reading=reading)  # type: ignore[arg-type]  # a stored time is never NULL
    if plain == "postgresql":
        return decoded_records(
            rows,
            session_id,
            utc_micros,
            unescape=(unescape_json_text, unescape),
            reading=reading,
        )
    return decoded_records(rows, session_id, reading=reading)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_micros(micros: int) -> datetime:
    """The aware UTC time `micros` microseconds after the epoch (exact: integer arithmetic)."""
    return _EPOCH + timedelta(microseconds=micros)


def event_model(values: Mapping[Any, Any]) -> CompactionEvent:
    """Build a `CompactionEvent` from an events row's mapping."""
    return CompactionEvent.model_validate(dict(values), context=STORED)


# The models are built on first use (`sessionstore.models`). A store decodes what it reads:
# the validator of stored payloads, and with it every message class, is built with the
# store, as it was on import before, so a store's first read does not pay for it.
shared_validator()
