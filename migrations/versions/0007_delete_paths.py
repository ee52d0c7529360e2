"""Make deleting a session linear at any chain depth: index every referencing column, detach loops.

Revision ID: 0007_delete_paths
Revises: 0006_usage
Create Date: 2026-11-25

What changes: deleting a session removes its rows through ON DELETE CASCADE (the one way
raw rows go, see 0004). Two things made that quadratic, and impossible on SQLite past a
chain of about 1,000 loops:

- the columns that reference a loop, a block, a section or a message had no index that
  leads with them (the unique keys lead with `session_id`), so each deleted parent row
  scanned its child tables: this revision adds one index per such column;
- on SQLite, `sessionstore_loops.parent_loop_id` cascades to the loop's children from
  inside the cascade that deletes the loop, so deleting a chain nested one trigger level
  per loop (SQLite stops at 1,000: "too many levels of trigger recursion"). A BEFORE
  DELETE trigger on sessions now sets `parent_loop_id` of the session's loops to NULL (one
  statement) before the cascade runs, so no loop's deletion cascades to another loop. Loops
  are not immutable (a loop is closed by an UPDATE); the detached chain is never seen, since
  the loops go in the same statement. PostgreSQL queues its cascades instead of nesting
  them, and there the UPDATE would cost more than the index look-ups it saves (about 20%
  of a deletion, measured): it gets the indexes only.

The immutability triggers of 0001, 0003, 0004 and 0006 are unchanged: a message, block,
section, digest or usage row still goes only with its whole session.
Data step: none (the indexes are built from the rows already stored).
Downgrade: drops the trigger (SQLite) and the indexes; no row changes.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007_delete_paths"
down_revision: str | None = "0006_usage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SESSIONS = "sessionstore_sessions"
LOOPS = "sessionstore_loops"
TRIGGER = "sessionstore_sessions_detach_loops"

# Every column that references a row a session's deletion removes (a loop, a block, a
# section, a message), with the table it is in. Frozen here: later schema changes must
# not change what this revision creates.
REFERENCING_COLUMNS: tuple[tuple[str, str], ...] = (
    (LOOPS, "parent_loop_id"),
    ("sessionstore_messages", "loop_id"),
    ("sessionstore_blocks", "loop_id"),
    ("sessionstore_block_sections", "block_id"),
    ("sessionstore_section_messages", "section_id"),
    ("sessionstore_compaction_events", "loop_id"),
    ("sessionstore_compaction_events", "block_id"),
    ("sessionstore_digests", "head_loop_id"),
    ("sessionstore_digests", "through_loop_id"),
    ("sessionstore_usage", "loop_id"),
    ("sessionstore_usage", "message_id"),
)


def index_name(table: str, column: str) -> str:
    return f"ix_{table}_{column}"


def upgrade() -> None:
    for table, column in REFERENCING_COLUMNS:
        op.create_index(index_name(table, column), table, [column])
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            f"CREATE TRIGGER {TRIGGER} BEFORE DELETE ON {SESSIONS} BEGIN "
            f"UPDATE {LOOPS} SET parent_loop_id = NULL "
            "WHERE session_id = OLD.id AND parent_loop_id IS NOT NULL; END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
    for table, column in reversed(REFERENCING_COLUMNS):
        op.drop_index(index_name(table, column), table_name=table)
