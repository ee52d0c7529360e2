"""Loops: a child, the root and a loop by id are looked up through keys that bound them.

Revision ID: 0017_loop_parent_key
Revises: 0016_digest_extends
Create Date: 2026-11-29

Why: a loop's children are looked up by its id and its session's key: the cascade of every
loop a session's deletion removes (`parent_loop_id = $1 AND session_id = $2 AND app_name =
$3 AND user_id = $4`, the foreign key's own statement), and a session's root (`parent_loop_id
IS NULL`), which a resume probes. A PostgreSQL planner without statistics (a new table, or
autovacuum off) estimates one row for any index that bounds the session's whole key, so the
unique key `(session_id, app_name, user_id, sequence)` cost it as much as the parent index
`(session_id, parent_loop_id)` of migration 0001, and it often took the key: each lookup
read all the session's loops. Deleting a session of 8,000 loops took 22.6 s (2,000: 1.51
s); the root probe of a 3,000-loop session read 3,000 rows. Which index won a tie changed
with the table's size (and with which index was built last), so no index of the same kind
could make sure of it. Now:

- `ix_sessionstore_loops_parent` is `(parent_loop_id, session_id, app_name, user_id)`: it
  bounds every condition of a child's lookup, and replaces 0007's index of
  `parent_loop_id` alone, its first column (one index fewer to write a loop);
- `ix_sessionstore_loops_root`, `(session_id, app_name, user_id) WHERE parent_loop_id IS
  NULL`, holds a session's roots only: smaller than any other index, it costs the root's
  lookup least (the parent index, which bounds it too, tied with the key on small
  tables);
- on PostgreSQL, the unique key is `(session_id, sequence, app_name, user_id)`: the same
  constraint, whose scan a lookup by the key and another column bounds by the session id
  alone, which the planner estimates at many rows. A loop by its id then goes through the
  primary key (or 0015's index), on Citus too, which cannot hold 0015's index; a loop by
  its sequence, and a session's loops in order, through the key as before. SQLite, whose
  planner is not misled, keeps its constraint (changing one means copying the table).

Small tables: a planner without statistics estimates a table's rows from its pages and
its columns' types; below about 200 rows estimated (some 1,200 loops), a lookup bounded
by the session id alone is estimated at one row too, every usable index costs the same,
and PostgreSQL keeps the plan through the index built last. So the key is built first, then
0015's index on `id` (plain PostgreSQL), then the parent index: a lookup by id takes 0015's
index, a child's the parent index.

`tests/integration/test_loop_lookups.py` counts the rows the plans of five lookups touch,
on a chain of 1,000 loops written through the store and chains of 3,000 and 20,000 loops
written in SQL, never analyzed.

Data step: none. The index and (PostgreSQL) the unique key are built again with the loops
table locked against writes, in the time an index of one row a loop takes.

Downgrade: 0001's parent index, 0007's index of the parent alone, and 0008's order of the
key; no roots' index.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_loop_parent_key"
down_revision: str | None = "0016_digest_extends"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOOPS = "sessionstore_loops"
INDEX = "ix_sessionstore_loops_parent"
KEY = "uq_sessionstore_loops_sequence"
ID_INDEX = "uq_sessionstore_loops_id"
ROOTS = "ix_sessionstore_loops_root"
PARENT_ALONE = "ix_sessionstore_loops_parent_loop_id"  # migration 0007's


def _key(columns: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute(f"ALTER TABLE {LOOPS} DROP CONSTRAINT {KEY}")
    op.execute(f"ALTER TABLE {LOOPS} ADD CONSTRAINT {KEY} UNIQUE ({columns})")
    # Built again after the key: see "Small tables" above.
    if bind.exec_driver_sql(f"SELECT to_regclass('{ID_INDEX}') IS NOT NULL").scalar():
        op.execute(f"DROP INDEX {ID_INDEX}")
        op.execute(f"CREATE UNIQUE INDEX {ID_INDEX} ON {LOOPS} (id)")


def upgrade() -> None:
    _key("session_id, sequence, app_name, user_id")
    op.drop_index(INDEX, table_name=LOOPS)
    op.create_index(INDEX, LOOPS, ["parent_loop_id", "session_id", "app_name", "user_id"])
    op.drop_index(PARENT_ALONE, table_name=LOOPS)  # the new index's first column
    roots = sa.text("parent_loop_id IS NULL")
    op.create_index(
        ROOTS,
        LOOPS,
        ["session_id", "app_name", "user_id"],
        sqlite_where=roots,
        postgresql_where=roots,
    )


def downgrade() -> None:
    op.drop_index(ROOTS, table_name=LOOPS)
    _key("session_id, app_name, user_id, sequence")
    op.create_index(PARENT_ALONE, LOOPS, ["parent_loop_id"])
    op.drop_index(INDEX, table_name=LOOPS)
    op.create_index(INDEX, LOOPS, ["session_id", "parent_loop_id"])
