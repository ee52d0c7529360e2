"""Add session digests: the carried-forward summary of the loops before a compaction's scope.

Revision ID: 0003_session_digests
Revises: 0002_user_message_index
Create Date: 2026-11-22

What changes: creates `sessionstore_digests`. A digest is written by a compaction, with its
blocks, for the loops of the active chain before the scope (`through_loop_id` is the
newest of them; `folded` lists each folded loop with the number of its messages folded).
Rows are written once: an UPDATE is refused, as for messages and blocks.
Data step: none (the next compaction of a session writes its first digest).
Downgrade: drops the table and its trigger, digests included.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_session_digests"
down_revision: str | None = "0002_user_message_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC = sa.DateTime(timezone=True)
TABLE = "sessionstore_digests"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("id", ID, primary_key=True, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("overlay", sa.String(length=64), nullable=False),
        sa.Column("head_loop_id", ID, nullable=False),
        sa.Column("through_loop_id", ID, nullable=False),
        sa.Column("folded", JSON, nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("details", JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessionstore_sessions.id"],
            name=op.f(f"fk_{TABLE}_session_id"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["head_loop_id"],
            ["sessionstore_loops.id"],
            name=op.f(f"fk_{TABLE}_head_loop_id"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["through_loop_id"],
            ["sessionstore_loops.id"],
            name=op.f(f"fk_{TABLE}_through_loop_id"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{TABLE}")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_sessionstore_digests_head", TABLE, ["session_id", "overlay", "head_loop_id", "id"]
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE} "
            "FOR EACH ROW EXECUTE FUNCTION sessionstore_refuse_update()"
        )
    else:
        op.execute(
            f"CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE} "
            f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {TABLE} are immutable "
            "(UPDATE refused)'); END"
        )


def downgrade() -> None:
    op.execute(
        f"DROP TRIGGER IF EXISTS {TABLE}_no_update"
        + (f" ON {TABLE}" if op.get_bind().dialect.name == "postgresql" else "")
    )
    op.drop_index("ix_sessionstore_digests_head", table_name=TABLE)
    op.drop_table(TABLE)
