"""Create the sessionstore schema.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-22

What changes: creates the sessions, loops, messages, compaction blocks, block sections,
section messages and compaction events tables with their indexes, and triggers (SQLite
and PostgreSQL) that refuse an UPDATE of a message row or of a written block's contents.
Data step: none.
Downgrade: drops everything this revision created, data included.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types, so later changes to sessionstore.store._tables never
# change what this revision creates.
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC = sa.DateTime(timezone=True)
SESSION_ID = sa.String(length=128)

# Rows of these tables are written once: the database refuses an UPDATE.
IMMUTABLE_TABLES = (
    "sessionstore_messages",
    "sessionstore_blocks",
    "sessionstore_block_sections",
    "sessionstore_section_messages",
)


def _id() -> sa.Column:
    return sa.Column("id", ID, primary_key=True, autoincrement=True, nullable=False)


def _session_id() -> sa.Column:
    return sa.Column("session_id", SESSION_ID, nullable=False)


def _session_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["session_id"],
        ["sessionstore_sessions.id"],
        name=op.f(f"fk_{table}_session_id"),
        ondelete="CASCADE",
    )


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}"), ondelete="CASCADE"
    )


def _pk(table: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}"))


def _uq(table: str, *columns: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*columns, name=op.f(f"uq_{table}_{'_'.join(columns)}"))


def upgrade() -> None:
    t = "sessionstore_sessions"
    op.create_table(
        t,
        sa.Column("id", SESSION_ID, nullable=False),
        sa.Column("app_name", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=128), nullable=False),
        sa.Column("title", sa.String(length=512), nullable=True),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("active_loop_id", ID, nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("loop_count", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        _pk(t),
    )
    op.create_index("ix_sessionstore_sessions_created", t, ["created_at", "id"])
    op.create_index(
        "ix_sessionstore_sessions_tenant", t, ["app_name", "user_id", "created_at", "id"]
    )

    t = "sessionstore_loops"
    op.create_table(
        t,
        _id(),
        _session_id(),
        sa.Column("parent_loop_id", ID, nullable=True),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("closed_at", UTC, nullable=True),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("token_total", sa.BigInteger(), nullable=False),
        sa.Column("turn_count", sa.Integer(), nullable=False),
        sa.Column("open_tool_call_ids", JSON, nullable=False),
        _fk(t, "parent_loop_id", "sessionstore_loops"),
        _session_fk(t),
        _pk(t),
        _uq(t, "session_id", "sequence"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_sessionstore_loops_parent", t, ["session_id", "parent_loop_id"])

    t = "sessionstore_messages"
    op.create_table(
        t,
        _id(),
        _session_id(),
        sa.Column("loop_id", ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("tool_call_id", sa.String(length=255), nullable=True),
        sa.Column("tool_name", sa.String(length=255), nullable=True),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("client_id", sa.String(length=255), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        _fk(t, "loop_id", "sessionstore_loops"),
        _session_fk(t),
        _pk(t),
        _uq(t, "session_id", "client_id"),
        _uq(t, "session_id", "loop_id", "position"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_sessionstore_messages_turn", t, ["session_id", "loop_id", "turn_index"])

    t = "sessionstore_blocks"
    op.create_table(
        t,
        _id(),
        _session_id(),
        sa.Column("loop_id", ID, nullable=False),
        sa.Column("overlay", sa.String(length=64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("keep_first_start", sa.Integer(), nullable=True),
        sa.Column("keep_first_end", sa.Integer(), nullable=True),
        sa.Column("strategy", sa.String(length=128), nullable=False),
        sa.Column("config", JSON, nullable=False),
        sa.Column("tokens_before", sa.BigInteger(), nullable=False),
        sa.Column("tokens_after", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        _fk(t, "loop_id", "sessionstore_loops"),
        _session_fk(t),
        _pk(t),
        _uq(t, "session_id", "loop_id", "overlay", "generation"),
        sqlite_autoincrement=True,
    )

    t = "sessionstore_block_sections"
    op.create_table(
        t,
        _id(),
        _session_id(),
        sa.Column("block_id", ID, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("start_turn", sa.Integer(), nullable=False),
        sa.Column("end_turn", sa.Integer(), nullable=False),
        _fk(t, "block_id", "sessionstore_blocks"),
        _session_fk(t),
        _pk(t),
        _uq(t, "session_id", "block_id", "kind"),
    )

    t = "sessionstore_section_messages"
    op.create_table(
        t,
        _id(),
        _session_id(),
        sa.Column("section_id", ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("covers", JSON, nullable=False),
        _fk(t, "section_id", "sessionstore_block_sections"),
        _session_fk(t),
        _pk(t),
        _uq(t, "session_id", "section_id", "position"),
    )

    t = "sessionstore_compaction_events"
    op.create_table(
        t,
        _id(),
        _session_id(),
        sa.Column("loop_id", ID, nullable=True),
        sa.Column("block_id", ID, nullable=True),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("tokens_before", sa.BigInteger(), nullable=False),
        sa.Column("tokens_after", sa.BigInteger(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("details", JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        _fk(t, "block_id", "sessionstore_blocks"),
        _fk(t, "loop_id", "sessionstore_loops"),
        _session_fk(t),
        _pk(t),
    )
    op.create_index("ix_sessionstore_compaction_events_session", t, ["session_id", "id"])

    _create_immutability_triggers()


def downgrade() -> None:
    _drop_immutability_triggers()
    op.drop_table("sessionstore_compaction_events")
    op.drop_table("sessionstore_section_messages")
    op.drop_table("sessionstore_block_sections")
    op.drop_table("sessionstore_blocks")
    op.drop_table("sessionstore_messages")
    op.drop_table("sessionstore_loops")
    op.drop_table("sessionstore_sessions")


def _create_immutability_triggers() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE FUNCTION sessionstore_refuse_update() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION 'sessionstore: rows of % are immutable (UPDATE refused)',
                    TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
            END;
            $$
            """
        )
        for table in IMMUTABLE_TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION sessionstore_refuse_update()"
            )
    else:
        for table in IMMUTABLE_TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {table} are immutable "
                "(UPDATE refused)'); END"
            )


def _drop_immutability_triggers() -> None:
    is_postgres = op.get_bind().dialect.name == "postgresql"
    for table in IMMUTABLE_TABLES:
        op.execute(
            f"DROP TRIGGER IF EXISTS {table}_no_update" + (f" ON {table}" if is_postgres else "")
        )
    if is_postgres:
        op.execute("DROP FUNCTION IF EXISTS sessionstore_refuse_update()")
