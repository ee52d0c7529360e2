"""The loops' parent index holds the session's whole key; a partial index finds its roots.

Revision ID: 0017_loop_parent_key
Revises: 0016_digest_extends
Create Date: 2026-11-29

Why: a loop's children are looked up by its id and its session's key: the cascade of every
loop a session's deletion removes (`parent_loop_id = $1 AND session_id = $2 AND app_name =
$3 AND user_id = $4`, the foreign key's own statement), and a session's root (`parent_loop_id
IS NULL`), which a resume probes. `ix_sessionstore_loops_parent` held `(session_id,
parent_loop_id)` (migration 0001, before a session's key had three columns, 0008). A
PostgreSQL planner without statistics (a new table, or autovacuum off) matched the unique
key `(session_id, app_name, user_id, sequence)` on three columns against that index's two,
took it, and read all the session's loops for each lookup: deleting a session of 8,000
loops took 22.6 s (2,000: 1.51 s), and the root probe of a 3,000-loop session read 3,000
rows. Now:

- `ix_sessionstore_loops_parent` is `(session_id, app_name, user_id, parent_loop_id)`: it
  matches every condition of a child's lookup, and is chosen with or without statistics;
- `ix_sessionstore_loops_root`, `(session_id, app_name, user_id) WHERE parent_loop_id IS
  NULL`, holds a session's roots only (for `parent_loop_id IS NULL`, the parent index and
  the sequence key cost a planner without statistics the same, and it took the key).

The order of the indexes: without statistics, a lookup by a loop's id and its session's key
costs the same through every index that holds the key (each estimates one row), and
PostgreSQL keeps, of paths that cost the same, the one through the most recently built
index. 0015's index on `id` alone was the newest, which is why the lookups by id took it;
the parent index built here would now be, and lookups by id would read all the session's
loops through it. So 0015's index is built again last, on plain PostgreSQL (Citus has none).
A lookup by the parent cannot use it, and the roots' index costs less than any other.

`tests/integration/test_loop_lookups.py` counts the rows the plans of every lookup touch,
on a 3,000-loop chain never analyzed.

Both backends (Citus too: plain indexes). Data step: none. The indexes are built with the
loops table locked against writes, in the time an index of one row a loop takes (the
roots': one row a chain).

Downgrade: the index of 0001 again, and no roots' index.
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
ROOTS = "ix_sessionstore_loops_root"
ID_INDEX = "uq_sessionstore_loops_id"


def upgrade() -> None:
    op.drop_index(INDEX, table_name=LOOPS)
    op.create_index(INDEX, LOOPS, ["session_id", "app_name", "user_id", "parent_loop_id"])
    roots = sa.text("parent_loop_id IS NULL")
    op.create_index(
        ROOTS,
        LOOPS,
        ["session_id", "app_name", "user_id"],
        sqlite_where=roots,
        postgresql_where=roots,
    )
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        found = bind.exec_driver_sql(f"SELECT to_regclass('{ID_INDEX}') IS NOT NULL").scalar()
        if found:
            # Built again, to be the newest: see "The order of the indexes" above.
            op.execute(f"DROP INDEX {ID_INDEX}")
            op.execute(f"CREATE UNIQUE INDEX {ID_INDEX} ON {LOOPS} (id)")


def downgrade() -> None:
    op.drop_index(ROOTS, table_name=LOOPS)
    op.drop_index(INDEX, table_name=LOOPS)
    op.create_index(INDEX, LOOPS, ["session_id", "parent_loop_id"])
