"""SQLite: the raw messages' search index is brought up to date by the search, not the append.

Revision ID: 0009_deferred_search_index
Revises: 0008_session_keys
Create Date: 2026-11-25

What changes (SQLite only; PostgreSQL and Citus are left as they are): the AFTER INSERT
trigger that fed every new row of `sessionstore_messages` to its FTS5 table is dropped;
tokenizing each message as it was written was the largest cost of an append. The store's
search indexes the rows after the index's highest id first (rows are numbered in commit
order), so a search right after an append still finds it. The AFTER DELETE trigger now
tells the index about a deleted row only when the index holds it (its id is at most the
index's highest id): an external-content FTS5 table must never be told to forget a row it
does not hold. `sessionstore_section_messages` keeps its triggers (compaction writes few rows).

Data step: none; every existing row is indexed already.

Downgrade: indexes the rows not indexed yet, then restores the 0005 triggers.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009_deferred_search_index"
down_revision: str | None = "0008_session_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "sessionstore_messages"
FTS = f"{TABLE}_fts"
INDEXED_THROUGH = f"SELECT coalesce(max(id), 0) FROM {FTS}_docsize"

DELETE_OLD = (
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, search_text) "
    "VALUES ('delete', OLD.id, OLD.search_text); END"
)
DELETE_NEW = (
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {TABLE} "
    f"WHEN OLD.id <= ({INDEXED_THROUGH}) BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, search_text) "
    "VALUES ('delete', OLD.id, OLD.search_text); END"
)
INSERT_OLD = (
    f"CREATE TRIGGER {FTS}_insert AFTER INSERT ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}(rowid, search_text) VALUES (NEW.id, NEW.search_text); END"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER IF EXISTS {FTS}_insert")
    op.execute(f"DROP TRIGGER IF EXISTS {FTS}_delete")
    op.execute(DELETE_NEW)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        f"INSERT INTO {FTS}(rowid, search_text) SELECT id, search_text FROM {TABLE} "
        f"WHERE id > ({INDEXED_THROUGH}) ORDER BY id"
    )
    op.execute(f"DROP TRIGGER IF EXISTS {FTS}_delete")
    op.execute(DELETE_OLD)
    op.execute(INSERT_OLD)
