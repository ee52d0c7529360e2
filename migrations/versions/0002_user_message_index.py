"""Index the user messages of each loop, for the context loader.

Revision ID: 0002_user_message_index
Revises: 0001_initial
Create Date: 2026-11-22

What changes: adds a partial index on `sessionstore_messages (session_id, loop_id,
position) WHERE kind = 'user'`, so the loader finds the latest user request of a
chain without scanning the loop (SQLite and PostgreSQL both support partial indexes).
Data step: none (the index is built from existing rows).
Downgrade: drops the index.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_user_message_index"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

USER_ONLY = sa.text("kind = 'user'")


def upgrade() -> None:
    op.create_index(
        "ix_sessionstore_messages_user",
        "sessionstore_messages",
        ["session_id", "loop_id", "position"],
        sqlite_where=USER_ONLY,
        postgresql_where=USER_ONLY,
    )


def downgrade() -> None:
    op.drop_index("ix_sessionstore_messages_user", table_name="sessionstore_messages")
