"""PostgreSQL: the raw messages' search vector is written by the append, not generated.

Revision ID: 0012_written_search_vector
Revises: 0011_compact_messages
Create Date: 2026-11-28

What changes, on PostgreSQL only (SQLite is left as it is):

- `sessionstore_messages.search_vector` is a plain `tsvector` column (`DROP EXPRESSION`): the
  append writes it, as a literal built in Python for an ASCII text (the vector
  `to_tsvector('simple', ...)` gives for it, see `sessionstore.store._search_vector`) and
  by `to_tsvector('simple', ...)` for any other. The generated column's `to_tsvector` was
  most of a batch append's time on the server. Its GIN index is kept as it is.
- `sessionstore_messages.search_text` is dropped: nothing reads it, and the vector no
  longer derives from it (fewer bytes a row).

Data step: none on PostgreSQL. Every stored vector keeps its value, and is the one the
append now writes for the same message, so rows stored before and after match a query
alike and rank alike. Citus refuses `DROP EXPRESSION` on a distributed table: there the
vectors are copied into a new plain column (the no-update trigger set aside for it), which
replaces the generated one, and the GIN index is built again.

The summaries (`sessionstore_section_messages`) keep their generated vector: they are
written by a compaction, a few at a time.

Downgrade: `search_text` is filled again from each payload (`indexed_text`, as 0005 did,
with the table's no-update trigger set aside), and `search_vector` generated from it again
(the column is added anew, so PostgreSQL computes every row's vector; the GIN index is
built again).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sessionstore._search_text import indexed_text
from sessionstore.models import MESSAGE_ADAPTER

revision: str = "0012_written_search_vector"
down_revision: str | None = "0011_compact_messages"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MESSAGES = "sessionstore_messages"
INDEX = f"ix_{MESSAGES}_search"
NO_UPDATE = f"{MESSAGES}_no_update"
TS_VECTOR = "to_tsvector('simple'::regconfig, coalesce(search_text, ''))"
BATCH = 500


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    if _distributed(bind):
        _copy_to_plain_column(bind)
    else:
        op.execute(f"ALTER TABLE {MESSAGES} ALTER COLUMN search_vector DROP EXPRESSION")
    op.execute(f"ALTER TABLE {MESSAGES} DROP COLUMN search_text")


def _distributed(bind: sa.Connection) -> bool:
    """Whether Citus distributes the messages (it refuses `DROP EXPRESSION` on them)."""
    if bind.execute(sa.text("SELECT to_regclass('pg_catalog.pg_dist_partition')")).scalar():
        found = bind.execute(
            sa.text(
                "SELECT 1 FROM pg_catalog.pg_dist_partition "
                f"WHERE logicalrelid = '{MESSAGES}'::regclass"
            )
        ).first()
        return found is not None
    return False


def _copy_to_plain_column(bind: sa.Connection) -> None:
    """Citus: the same change, as a new plain column filled from the generated one."""
    op.execute(f"ALTER TABLE {MESSAGES} ADD COLUMN written_vector tsvector")
    op.execute(f"ALTER TABLE {MESSAGES} DISABLE TRIGGER {NO_UPDATE}")
    bind.execute(sa.text(f"UPDATE {MESSAGES} SET written_vector = search_vector"))
    op.execute(f"ALTER TABLE {MESSAGES} ENABLE TRIGGER {NO_UPDATE}")
    op.execute(f"ALTER TABLE {MESSAGES} DROP COLUMN search_vector")  # and its index
    op.execute(f"ALTER TABLE {MESSAGES} RENAME COLUMN written_vector TO search_vector")
    op.execute(f"CREATE INDEX {INDEX} ON {MESSAGES} USING gin (search_vector)")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute(f"ALTER TABLE {MESSAGES} ADD COLUMN search_text TEXT")
    _backfill(bind)
    op.execute(f"ALTER TABLE {MESSAGES} DROP COLUMN search_vector")
    op.execute(
        f"ALTER TABLE {MESSAGES} ADD COLUMN search_vector tsvector "
        f"GENERATED ALWAYS AS ({TS_VECTOR}) STORED"
    )
    op.execute(f"CREATE INDEX {INDEX} ON {MESSAGES} USING gin (search_vector)")


def _backfill(bind: sa.Connection) -> None:
    """Write `search_text` of every message again, its no-update trigger set aside."""
    select = sa.text(
        f"SELECT id, CAST(payload AS TEXT) FROM {MESSAGES} WHERE id > :after "
        f"ORDER BY id LIMIT {BATCH}"
    )
    update = sa.text(f"UPDATE {MESSAGES} SET search_text = :text WHERE id = :id")
    op.execute(f"ALTER TABLE {MESSAGES} DISABLE TRIGGER {NO_UPDATE}")
    after = 0
    while rows := bind.execute(select, {"after": after}).all():
        values = [
            {"id": row_id, "text": indexed_text(MESSAGE_ADAPTER.validate_json(payload))}
            for row_id, payload in rows
        ]
        bind.execute(update, values)
        after = rows[-1][0]
    op.execute(f"ALTER TABLE {MESSAGES} ENABLE TRIGGER {NO_UPDATE}")
