"""Full-text search over raw messages and summaries: SQLite FTS5, PostgreSQL tsvector + GIN.

Revision ID: 0005_search
Revises: 0003_session_digests
Create Date: 2026-11-22

What changes: adds `search_text` (the words search indexes, written by the store with each
row) to `sessionstore_messages` and `sessionstore_section_messages`. On SQLite, an
external-content FTS5 table per table (`<table>_fts`, over `search_text`) kept in sync by
AFTER INSERT / AFTER DELETE triggers (rows are never updated). On PostgreSQL, a stored
generated column `search_vector` (`to_tsvector('simple', search_text)`) with a GIN index.
Data step: fills `search_text` of existing rows with `sessionstore._search_text.indexed_text`
(the table's triggers are set aside for the step and restored), then builds the indexes.
Downgrade: drops the indexes, triggers, FTS tables and columns; no message content is lost.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sessionstore._search_text import indexed_text
from sessionstore.models import MESSAGE_ADAPTER

revision: str = "0005_search"
down_revision: str | None = "0004_raw_immutability"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("sessionstore_messages", "sessionstore_section_messages")
BATCH = 500


TS_VECTOR = "to_tsvector('simple'::regconfig, coalesce(search_text, ''))"


def upgrade() -> None:
    bind = op.get_bind()
    is_postgres = bind.dialect.name == "postgresql"
    for table in TABLES:
        op.add_column(table, sa.Column("search_text", sa.Text(), nullable=True))
        _backfill(bind, table, is_postgres)
        if is_postgres:
            op.execute(
                f"ALTER TABLE {table} ADD COLUMN search_vector tsvector "
                f"GENERATED ALWAYS AS ({TS_VECTOR}) STORED"
            )
            op.execute(f"CREATE INDEX ix_{table}_search ON {table} USING gin (search_vector)")
        else:
            op.execute(
                f"CREATE VIRTUAL TABLE {table}_fts USING fts5(search_text, "
                f"content='{table}', content_rowid='id', "
                "tokenize='unicode61 remove_diacritics 0')"
            )
            op.execute(f"INSERT INTO {table}_fts({table}_fts) VALUES ('rebuild')")
            op.execute(
                f"CREATE TRIGGER {table}_fts_insert AFTER INSERT ON {table} BEGIN "
                f"INSERT INTO {table}_fts(rowid, search_text) VALUES (NEW.id, NEW.search_text); "
                "END"
            )
            # An external-content table forgets a row only when told its old text.
            op.execute(
                f"CREATE TRIGGER {table}_fts_delete AFTER DELETE ON {table} BEGIN "
                f"INSERT INTO {table}_fts({table}_fts, rowid, search_text) "
                "VALUES ('delete', OLD.id, OLD.search_text); END"
            )


def _backfill(bind: sa.Connection, table: str, is_postgres: bool) -> None:
    """Write `search_text` of the rows already stored, with their UPDATE triggers set aside."""
    if bind.execute(sa.text(f"SELECT 1 FROM {table} LIMIT 1")).first() is None:
        return
    saved: list[str] = []
    if is_postgres:
        op.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
    else:
        rows = bind.execute(
            sa.text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :t"),
            {"t": table},
        ).all()
        for name, create in rows:
            op.execute(f'DROP TRIGGER "{name}"')
            saved.append(create)
    select = sa.text(
        f"SELECT id, CAST(payload AS TEXT) FROM {table} WHERE id > :after ORDER BY id LIMIT {BATCH}"
    )
    update = sa.text(f"UPDATE {table} SET search_text = :text WHERE id = :id")
    after = 0
    while rows := bind.execute(select, {"after": after}).all():
        values = [
            {"id": row_id, "text": indexed_text(MESSAGE_ADAPTER.validate_json(payload))}
            for row_id, payload in rows
        ]
        bind.execute(update, values)
        after = rows[-1][0]
    if is_postgres:
        op.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    for create in saved:
        op.execute(create)


def downgrade() -> None:
    is_postgres = op.get_bind().dialect.name == "postgresql"
    for table in TABLES:
        if is_postgres:
            op.execute(f"DROP INDEX IF EXISTS ix_{table}_search")
            op.drop_column(table, "search_vector")
        else:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_fts_insert")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_fts_delete")
            op.execute(f"DROP TABLE IF EXISTS {table}_fts")
        op.drop_column(table, "search_text")
