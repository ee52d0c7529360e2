"""SQLite: the raw messages' no-replace trigger checks the keys the table has.

Revision ID: 0013_message_replace_keys
Revises: 0012_written_search_vector
Create Date: 2026-11-29

What changes, on SQLite only (PostgreSQL has no `INSERT OR REPLACE`; nothing changes there,
on Citus neither):

`sessionstore_messages_no_replace` (0004, rewritten by 0008) refuses an INSERT that would
replace a stored message. It looked for a row with the same id, the same session key and
position, or the same session key and client id. Since 0011 SQLite's position key is
`(loop_id, position)` alone, so an `INSERT OR REPLACE` naming a stored message's loop and
position under another session id (or tenant) passed the trigger and replaced the row,
on any connection that does not enforce foreign keys (SQLite's default). The trigger is
created again with one look-up a key of the table, each the key's own columns: the id,
`(loop_id, position)` and, for a message with a client id, the session key and client id.
Each look-up is one probe of the key's index.

Data step: none.
Downgrade: the trigger as 0008 and 0011 left it.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013_message_replace_keys"
down_revision: str | None = "0012_written_search_vector"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MESSAGES = "sessionstore_messages"
TRIGGER = f"{MESSAGES}_no_replace"
_RAISE = (
    f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {MESSAGES} are immutable "
    "(INSERT OR REPLACE refused)'); END"
)
_TENANT = (
    f"{MESSAGES}.session_id = NEW.session_id AND {MESSAGES}.app_name = NEW.app_name "
    f"AND {MESSAGES}.user_id = NEW.user_id"
)

# Frozen here: later schema changes must not change what this revision creates.
TRIGGER_0013 = (
    f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON {MESSAGES} "
    f"WHEN EXISTS (SELECT 1 FROM {MESSAGES} WHERE {MESSAGES}.id = NEW.id) "
    f"OR EXISTS (SELECT 1 FROM {MESSAGES} "
    f"WHERE {MESSAGES}.loop_id = NEW.loop_id AND {MESSAGES}.position = NEW.position) "
    f"OR (NEW.client_id IS NOT NULL AND EXISTS (SELECT 1 FROM {MESSAGES} "
    f"WHERE {_TENANT} AND {MESSAGES}.client_id = NEW.client_id)) " + _RAISE
)
TRIGGER_0008 = (
    f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON {MESSAGES} "
    f"WHEN EXISTS (SELECT 1 FROM {MESSAGES} WHERE {MESSAGES}.id = NEW.id "
    f"OR ({_TENANT} AND {MESSAGES}.loop_id = NEW.loop_id "
    f"AND {MESSAGES}.position = NEW.position) "
    f"OR ({_TENANT} AND {MESSAGES}.client_id = NEW.client_id)) " + _RAISE
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
    op.execute(TRIGGER_0013)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
    op.execute(TRIGGER_0008)
