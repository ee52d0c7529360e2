"""Refuse the deletion or replacement of a single raw message, block or digest row.

Revision ID: 0004_raw_immutability
Revises: 0003_session_digests
Create Date: 2026-11-22

What changes: 0001 and 0003 refuse an UPDATE of these rows; a DELETE (and, on SQLite, an
`INSERT OR REPLACE`, which deletes the row it replaces without firing DELETE triggers)
could still rewrite or remove one, leaving a silent gap in a loop. This revision adds
triggers on the messages, blocks, block sections, section messages and digests tables:

- a DELETE is refused while the row's session still exists, so deleting a whole session
  (its cascade runs after the session row is gone, on both backends) keeps working, and
  so do `sessions delete` and purges, while deleting one message, block or loop is refused;
- on SQLite, an INSERT that would replace an existing row (same id or unique key) is refused.

A TRUNCATE (PostgreSQL) is not a row operation and is not refused: it needs the table
owner's rights, like dropping these triggers.
Data step: none.
Downgrade: drops the triggers (and the PostgreSQL function); rows are kept.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004_raw_immutability"
down_revision: str | None = "0003_session_digests"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SESSIONS = "sessionstore_sessions"

# Each table with the unique keys an `INSERT OR REPLACE` could replace a row by (besides id).
# Frozen here: later schema changes must not change what this revision creates.
TABLES: dict[str, tuple[tuple[str, ...], ...]] = {
    "sessionstore_messages": (("session_id", "loop_id", "position"), ("session_id", "client_id")),
    "sessionstore_blocks": (("session_id", "loop_id", "overlay", "generation"),),
    "sessionstore_block_sections": (("session_id", "block_id", "kind"),),
    "sessionstore_section_messages": (("session_id", "section_id", "position"),),
    "sessionstore_digests": (),
}


def _same_key(table: str, columns: tuple[str, ...]) -> str:
    # A NULL (a message without client_id) equals nothing, as in the unique key itself.
    return " AND ".join(f"{table}.{column} = NEW.{column}" for column in columns)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # One check per statement over its deleted rows (a transition table): deleting a
        # session with many messages costs one look-up per cascaded statement, not one
        # trigger call per row.
        op.execute(
            f"""
            CREATE FUNCTION sessionstore_refuse_delete() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                -- A cascade from deleting the session runs after the session row is gone.
                IF EXISTS (
                    SELECT 1 FROM {SESSIONS}
                    WHERE id IN (SELECT DISTINCT session_id FROM deleted_rows)
                ) THEN
                    RAISE EXCEPTION 'sessionstore: rows of % are immutable (DELETE refused: '
                        'delete the whole session instead)', TG_TABLE_NAME
                        USING ERRCODE = 'integrity_constraint_violation';
                END IF;
                RETURN NULL;
            END;
            $$
            """
        )
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_no_delete AFTER DELETE ON {table} "
                "REFERENCING OLD TABLE AS deleted_rows "
                "FOR EACH STATEMENT EXECUTE FUNCTION sessionstore_refuse_delete()"
            )
        return
    for table, keys in TABLES.items():
        op.execute(
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
            f"WHEN EXISTS (SELECT 1 FROM {SESSIONS} WHERE id = OLD.session_id) "
            f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {table} are immutable "
            "(DELETE refused: delete the whole session instead)'); END"
        )
        conflicts = " OR ".join(
            [f"{table}.id = NEW.id", *(f"({_same_key(table, k)})" for k in keys)]
        )
        op.execute(
            f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
            f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {conflicts}) "
            f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {table} are immutable "
            "(INSERT OR REPLACE refused)'); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete ON {table}")
        op.execute("DROP FUNCTION IF EXISTS sessionstore_refuse_delete()")
        return
    for table in TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_replace")
