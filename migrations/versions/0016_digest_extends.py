"""A session digest stores the loops it folds itself, and the digest it extends.

Revision ID: 0016_digest_extends
Revises: 0015_loop_id_key
Create Date: 2026-11-29

Why: a compaction updates the chain's newest digest with the loops that left the scope
since. Each digest row stored, in `folded`, every loop folded since the root: the new
digest's list was the previous one's with the new loops after it. A session compacted
every 10 loops stored 0.54 MB of these lists at 1,000 loops and 14.5 MB at 5,000 (they
grew with the square of its compactions, and passed the messages near 10,000 loops), and
every compaction wrote, and every resume read, the whole list.

What changes: a nullable `extends_id` column on `sessionstore_digests`, the id of the
digest (of the same session) that the row's digest extends. A digest written from now on
stores in `folded` only the loops it folds itself; the loops it stands for are those of
the digest it extends, then its own. A digest written before holds them all and has no
`extends_id`, which reads the same: stored rows are not rewritten.

Data step: none on upgrade. Downgrade writes every digest's whole list back into
`folded` (the update trigger of migration 0003 is set aside for it) and drops the column.
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_digest_extends"
down_revision: str | None = "0015_loop_id_key"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DIGESTS = "sessionstore_digests"
TRIGGER = f"{DIGESTS}_no_update"
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Frozen here (0003's): later schema changes must not change what this revision creates.
SQLITE_TRIGGER = (
    f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE ON {DIGESTS} "
    f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {DIGESTS} are immutable "
    "(UPDATE refused)'); END"
)


def upgrade() -> None:
    op.add_column(DIGESTS, sa.Column("extends_id", ID, nullable=True))


def _whole_lists() -> None:
    """Write each extending digest's whole list of folded loops into its `folded`."""
    bind = op.get_bind()
    rows = bind.execute(
        sa.text(
            f"SELECT id, session_id, app_name, user_id, extends_id, CAST(folded AS TEXT) "
            f"FROM {DIGESTS} ORDER BY session_id, app_name, user_id, id"
        )
    )
    value = "CAST(:folded AS jsonb)" if bind.dialect.name == "postgresql" else ":folded"
    update = sa.text(
        f"UPDATE {DIGESTS} SET folded = {value} WHERE id = :id AND session_id = :sid "
        "AND app_name = :app AND user_id = :user"
    )
    session: tuple[str, str, str] | None = None
    whole: dict[int, list[list[int]]] = {}
    for digest_id, sid, app, user, extends_id, folded in rows.fetchall():
        if (sid, app, user) != session:
            session, whole = (sid, app, user), {}
        own = json.loads(folded)
        if extends_id is None:
            whole[digest_id] = own
            continue
        whole[digest_id] = [*whole.get(extends_id, []), *own]
        folded_json = json.dumps(whole[digest_id])
        params = {"folded": folded_json, "id": digest_id, "sid": sid, "app": app, "user": user}
        bind.execute(update, params)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE {DIGESTS} DISABLE TRIGGER {TRIGGER}")
        _whole_lists()
        op.execute(f"ALTER TABLE {DIGESTS} ENABLE TRIGGER {TRIGGER}")
    else:
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
        _whole_lists()
        op.execute(SQLITE_TRIGGER)
    # Not a batch (a copy of the table, without its triggers): SQLite drops a column
    # in place since 3.35.
    op.execute(f"ALTER TABLE {DIGESTS} DROP COLUMN extends_id")
