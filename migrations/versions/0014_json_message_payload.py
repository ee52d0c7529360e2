"""PostgreSQL: the raw messages' payload is `json` (its text), not `jsonb`.

Revision ID: 0014_json_message_payload
Revises: 0013_message_replace_keys
Create Date: 2026-11-29

What changes, on PostgreSQL only (SQLite stores JSON as text already; nothing changes
there): `sessionstore_messages.payload` becomes `json`. A read of the payloads (every
history read, context and export) fetched `CAST(payload AS TEXT)`, which printed each
row's `jsonb` anew on the server; `json` sends the stored text as it is. An append's
`jsonb` input built the binary form of every payload; `json` only checks the text. The
payloads are read whole or at one path (`#>>`, `->`, `->>`, `json_typeof`), which `json`
answers as well. On 5,000 stored messages the store's full read took 15-24% less time,
and the table is smaller (`docs/benchmarks.md`, "Stop 29").

Data step: the column's type is changed in place (`USING payload::json`, a rewrite of the
table; row triggers do not fire, so the no-update trigger needs no setting aside). A
payload stored before keeps its value: its text is `jsonb`'s printing of it (keys in
`jsonb`'s order), which decodes to the same message; the content hash is of the canonical
JSON the store computes, not of the stored text, so it still verifies. Citus applies the
change to every shard of the distributed table.

Downgrade: the column becomes `jsonb` again (`USING payload::jsonb`).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014_json_message_payload"
down_revision: str | None = "0013_message_replace_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MESSAGES = "sessionstore_messages"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"ALTER TABLE {MESSAGES} ALTER COLUMN payload TYPE json USING payload::json")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"ALTER TABLE {MESSAGES} ALTER COLUMN payload TYPE jsonb USING payload::jsonb")
