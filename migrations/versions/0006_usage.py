"""Provider usage per model call: input, output, cache read, cache write and reasoning tokens.

Revision ID: 0006_usage
Revises: 0005_search
Create Date: 2026-11-22

What changes: creates `sessionstore_usage`, one row per model call, on the loop and turn
it answered: written by the store for each appended assistant message that carries
`usage` (`message_id` set) and by `SessionStore.record_usage` (`message_id` NULL). Totals
per turn, loop and session are sums over the index `(session_id, loop_id, turn_index)`.
Rows are written once: an UPDATE is refused, as for messages.
Data step: one row for each stored assistant message whose payload has `usage`.
Downgrade: drops the table and its trigger (the usage stays inside the message payloads).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_usage"
down_revision: str | None = "0005_search"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
UTC = sa.DateTime(timezone=True)
TABLE = "sessionstore_usage"
COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("id", ID, primary_key=True, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("loop_id", ID, nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=False),
        sa.Column("message_id", ID, nullable=True),
        sa.Column("model", sa.String(length=255), nullable=True),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in COUNTS),
        sa.Column("created_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessionstore_sessions.id"],
            name=op.f(f"fk_{TABLE}_session_id"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["loop_id"],
            ["sessionstore_loops.id"],
            name=op.f(f"fk_{TABLE}_loop_id"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["sessionstore_messages.id"],
            name=op.f(f"fk_{TABLE}_message_id"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{TABLE}")),
        sa.UniqueConstraint(
            "session_id", "message_id", name=op.f(f"uq_{TABLE}_session_id_message_id")
        ),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_sessionstore_usage_turn", TABLE, ["session_id", "loop_id", "turn_index"])
    is_postgres = op.get_bind().dialect.name == "postgresql"
    if is_postgres:
        op.execute(
            f"CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE} "
            "FOR EACH ROW EXECUTE FUNCTION sessionstore_refuse_update()"
        )
        usage = "payload->'usage'"
        counts = [f"coalesce(({usage}->>'{name}')::bigint, 0)" for name in COUNTS]
        model, has_usage = "payload->>'model'", f"jsonb_typeof({usage}) = 'object'"
    else:
        op.execute(
            f"CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE} "
            f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {TABLE} are immutable "
            "(UPDATE refused)'); END"
        )
        counts = [f"coalesce(json_extract(payload, '$.usage.{name}'), 0)" for name in COUNTS]
        model, has_usage = (
            "json_extract(payload, '$.model')",
            ("json_type(payload, '$.usage') = 'object'"),
        )
    op.execute(
        f"INSERT INTO {TABLE} (session_id, loop_id, turn_index, message_id, model, "
        f"{', '.join(COUNTS)}, created_at) "
        f"SELECT session_id, loop_id, turn_index, id, {model}, {', '.join(counts)}, created_at "
        f"FROM sessionstore_messages WHERE kind = 'assistant' AND {has_usage} ORDER BY id"
    )


def downgrade() -> None:
    op.execute(
        f"DROP TRIGGER IF EXISTS {TABLE}_no_update"
        + (f" ON {TABLE}" if op.get_bind().dialect.name == "postgresql" else "")
    )
    op.drop_index("ix_sessionstore_usage_turn", table_name=TABLE)
    op.drop_table(TABLE)
