"""PostgreSQL: a unique index on the loops' `id` alone.

Revision ID: 0015_loop_id_key
Revises: 0014_json_message_payload
Create Date: 2026-11-29

Why: a loop is looked up by its id and its session's key (`id = :lid AND session_id =
:sid AND app_name = ... AND user_id = ...`): the loop counters an append updates, a loop's
row, and the foreign key check of every message inserted. The primary key `(id,
session_id, app_name, user_id)` answers it in one row, and so seems the unique key
`(session_id, app_name, user_id, sequence)` to a planner whose statistics say a session has
one loop (most do, and a session grows by thousands of loops between two `ANALYZE`s of a
large table) or that has none (a new table, or autovacuum off): it then reads all the
session's loops for each lookup, so an append to a session grows with its loops (3.9 s for
the first 1,000 new loops of a session, 8.7 s for the 6th thousand, on a table never
analyzed). An index on `id` alone is narrower than either, so the planner takes it and
reads one row (`tests/integration/test_loop_lookups.py`).

SQLite: nothing changes (the loops' `id` is its rowid already). Citus: nothing either; a
unique index there must hold the distribution column, so a distributed table cannot have
it (`sessionstore db distribute` drops it before it distributes the table).

Data step: none (loop ids are unique: one sequence numbers them). The index is built with
the table locked against writes, in the time an index of one row a loop takes.

Downgrade: drops the index.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015_loop_id_key"
down_revision: str | None = "0014_json_message_payload"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOOPS = "sessionstore_loops"
INDEX = "uq_sessionstore_loops_id"


def _distributed() -> bool:
    """Whether the loops table is a Citus distributed table (which cannot hold the index)."""
    bind = op.get_bind()
    if bind.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").first() is None:
        return False
    found = bind.exec_driver_sql(
        f"SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '{LOOPS}'::regclass"
    )
    return found.first() is not None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql" or _distributed():
        return
    op.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {INDEX} ON {LOOPS} (id)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
