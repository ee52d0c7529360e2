"""Fewer bytes a message: a binary content hash, usage kept in the payload, shorter keys.

Revision ID: 0011_compact_messages
Revises: 0010_lean_messages
Create Date: 2026-11-27

What changes, on both backends:

- `sessionstore_messages.content_hash` holds the SHA-256 digest's 32 bytes (`BLOB` on
  SQLite, `BYTEA` on PostgreSQL) instead of its 64 hex characters; the store still reads
  and writes the hex string, and every stored hash keeps its value;
- the usage an appended assistant message carries is no longer copied into a usage row:
  `session_usage` reads it from the message's payload, and the usage table keeps the rows
  of `record_usage` only; its foreign key to the messages (`fk_sessionstore_usage_message_id`)
  goes, as no new row names a message.

SQLite only: the messages table loses `uq_sessionstore_messages_sqlite_key` (it was what the
usage rows' foreign key referenced), and its position key `uq_sessionstore_messages_position`
is `(loop_id, position)`: loop ids are unique, and no shard needs the session's key in it
(PostgreSQL keeps the whole key: Citus needs the distribution column in every unique key).

Data step: the usage rows of appended messages (`message_id` set) are deleted (their
usage is in the payloads they were copied from, 0006). SQLite rebuilds the messages and
usage tables (renamed aside, created anew, rows copied with their ids, the old ones
dropped, as 0010 does), their triggers, the search view and the AUTOINCREMENT counters
carried over; the search index is kept (the ids do not change). PostgreSQL alters the
column in place (`decode(content_hash, 'hex')`).

Downgrade: the 0010 schema; the hashes are hex again, and a usage row is written again for
each stored assistant message whose payload has usage (as 0006 did, with new ids).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_compact_messages"
down_revision: str | None = "0010_lean_messages"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MESSAGES = "sessionstore_messages"
USAGE = "sessionstore_usage"
VIEW = f"{MESSAGES}_search"
USAGE_FK = f"fk_{USAGE}_message_id"
COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
BATCH = 1000

# ── the SQLite tables, frozen here ────────────────────────────────────────────────

MESSAGE_COLUMNS = (
    "id, session_id, loop_id, position, turn_index, kind, tool_call_id, tool_name, payload, "
    "token_count, content_hash, client_id, created_at, app_name, user_id"
)
CREATE_MESSAGES = f"""
CREATE TABLE {MESSAGES} (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    session_id VARCHAR(128) NOT NULL,
    loop_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    turn_index INTEGER NOT NULL,
    kind VARCHAR(32) NOT NULL,
    tool_call_id VARCHAR(255),
    tool_name VARCHAR(255),
    payload JSON NOT NULL,
    token_count INTEGER NOT NULL,
    content_hash {{hash_type}} NOT NULL,
    client_id VARCHAR(255),
    created_at DATETIME NOT NULL,
    app_name VARCHAR(128) NOT NULL,
    user_id VARCHAR(128) NOT NULL,
    {{keys}},
    CONSTRAINT fk_{MESSAGES}_loop_id
        FOREIGN KEY(loop_id, session_id, app_name, user_id)
        REFERENCES sessionstore_loops (id, session_id, app_name, user_id) ON DELETE CASCADE
)
"""
KEYS_0010 = (
    f"CONSTRAINT uq_{MESSAGES}_sqlite_key UNIQUE (id, session_id, app_name, user_id),\n    "
    f"CONSTRAINT uq_{MESSAGES}_position UNIQUE (session_id, app_name, user_id, loop_id, position)"
)
KEYS_0011 = f"CONSTRAINT uq_{MESSAGES}_position UNIQUE (loop_id, position)"

USAGE_COLUMNS = (
    "id, session_id, loop_id, turn_index, message_id, model, input_tokens, output_tokens, "
    "cache_read_tokens, cache_write_tokens, reasoning_tokens, created_at, app_name, user_id"
)
CREATE_USAGE = f"""
CREATE TABLE {USAGE} (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    session_id VARCHAR(128) NOT NULL,
    loop_id INTEGER NOT NULL,
    turn_index INTEGER NOT NULL,
    message_id INTEGER,
    model VARCHAR(255),
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    reasoning_tokens BIGINT NOT NULL,
    created_at DATETIME NOT NULL,
    app_name VARCHAR(128) NOT NULL,
    user_id VARCHAR(128) NOT NULL,
    CONSTRAINT uq_{USAGE}_message_id
        UNIQUE (session_id, app_name, user_id, message_id),
    CONSTRAINT fk_{USAGE}_loop_id FOREIGN KEY(loop_id, session_id, app_name, user_id)
        REFERENCES sessionstore_loops (id, session_id, app_name, user_id) ON DELETE CASCADE{{fk}}
)
"""
FK_0010 = (
    f",\n    CONSTRAINT {USAGE_FK} FOREIGN KEY(message_id, session_id, app_name, user_id)\n"
    f"        REFERENCES {MESSAGES} (id, session_id, app_name, user_id) ON DELETE CASCADE"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _postgres(compact=True)
    else:
        _sqlite(compact=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _postgres(compact=False)
    else:
        _sqlite(compact=False)


def _usage_from_payloads(dialect: str) -> str:
    """One usage row for each assistant message whose payload has usage (0006's data step)."""
    if dialect == "postgresql":
        usage = "payload->'usage'"
        counts = [f"coalesce(({usage}->>'{name}')::bigint, 0)" for name in COUNTS]
        model, has_usage = "payload->>'model'", f"jsonb_typeof({usage}) = 'object'"
    else:
        counts = [f"coalesce(json_extract(payload, '$.usage.{name}'), 0)" for name in COUNTS]
        model = "json_extract(payload, '$.model')"
        has_usage = "json_type(payload, '$.usage') = 'object'"
    return (
        f"INSERT INTO {USAGE} (session_id, app_name, user_id, loop_id, turn_index, message_id, "
        f"model, {', '.join(COUNTS)}, created_at) "
        f"SELECT session_id, app_name, user_id, loop_id, turn_index, id, {model}, "
        f"{', '.join(counts)}, created_at "
        f"FROM {MESSAGES} WHERE kind = 'assistant' AND {has_usage} ORDER BY id"
    )


# ── PostgreSQL: altered in place ────────────────────────────────────────────────────


def _postgres(compact: bool) -> None:
    if compact:
        op.execute(f"ALTER TABLE {USAGE} DROP CONSTRAINT {USAGE_FK}")
        op.execute(f"DELETE FROM {USAGE} WHERE message_id IS NOT NULL")
        op.execute(
            f"ALTER TABLE {MESSAGES} ALTER COLUMN content_hash TYPE BYTEA "
            "USING decode(content_hash, 'hex')"
        )
    else:
        op.execute(
            f"ALTER TABLE {MESSAGES} ALTER COLUMN content_hash TYPE VARCHAR(64) "
            "USING encode(content_hash, 'hex')"
        )
        op.execute(_usage_from_payloads("postgresql"))
        op.execute(
            f"ALTER TABLE {USAGE} ADD CONSTRAINT {USAGE_FK} "
            "FOREIGN KEY (message_id, session_id, app_name, user_id) "
            f"REFERENCES {MESSAGES} (id, session_id, app_name, user_id) ON DELETE CASCADE"
        )


# ── SQLite: the two tables rebuilt ──────────────────────────────────────────────────


def _sqlite(compact: bool) -> None:
    bind = op.get_bind()
    tables = f"'{MESSAGES}', '{USAGE}'"
    triggers = bind.execute(
        sa.text(
            f"SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ({tables})"
        )
    ).all()
    indexes = bind.execute(
        sa.text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
            f"AND tbl_name IN ({tables})"
        )
    ).all()
    view = bind.execute(
        sa.text(f"SELECT sql FROM sqlite_master WHERE type = 'view' AND name = '{VIEW}'")
    ).scalar_one()
    counters = dict(bind.execute(sa.text("SELECT name, seq FROM sqlite_sequence")).all())
    for name, _ in triggers:
        op.execute(f'DROP TRIGGER "{name}"')
    for name, _ in indexes:
        op.execute(f'DROP INDEX "{name}"')
    # The view names the messages table; the FTS5 index names only the view and keeps
    # its rows (the ids do not change).
    op.execute(f"DROP VIEW {VIEW}")
    # Leaf first: usage references the messages.
    op.execute(f"ALTER TABLE {USAGE} RENAME TO {USAGE}_old")
    op.execute(f"ALTER TABLE {MESSAGES} RENAME TO {MESSAGES}_old")
    op.execute(
        CREATE_MESSAGES.format(
            hash_type="BLOB" if compact else "VARCHAR(64)",
            keys=KEYS_0011 if compact else KEYS_0010,
        )
    )
    if compact:
        _copy_messages_with_binary_hashes(bind)
    else:
        columns = MESSAGE_COLUMNS.replace("content_hash", "lower(hex(content_hash))")
        op.execute(
            f"INSERT INTO {MESSAGES} ({MESSAGE_COLUMNS}) "
            f"SELECT {columns} FROM {MESSAGES}_old ORDER BY id"
        )
    op.execute(CREATE_USAGE.format(fk="" if compact else FK_0010))
    op.execute(
        f"INSERT INTO {USAGE} ({USAGE_COLUMNS}) SELECT {USAGE_COLUMNS} FROM {USAGE}_old "
        + ("WHERE message_id IS NULL " if compact else "")
        + "ORDER BY id"
    )
    op.execute(f"DROP TABLE {USAGE}_old")
    op.execute(f"DROP TABLE {MESSAGES}_old")
    for table in (MESSAGES, USAGE):
        if table in counters:
            op.execute(
                sa.text(
                    "INSERT OR REPLACE INTO sqlite_sequence (rowid, name, seq) "
                    "SELECT (SELECT rowid FROM sqlite_sequence WHERE name = :name), :name, "
                    "max(:seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = :name), 0))"
                ).bindparams(name=table, seq=counters[table])
            )
    if not compact:
        op.execute(_usage_from_payloads("sqlite"))
    for _, create in indexes:
        op.execute(create)
    op.execute(view)
    for _, create in triggers:
        op.execute(create)


def _copy_messages_with_binary_hashes(bind: sa.Connection) -> None:
    """Copy the messages in id order, each hex hash as its bytes (SQLite has no `unhex`)."""
    select = sa.text(
        f"SELECT {MESSAGE_COLUMNS} FROM {MESSAGES}_old WHERE id > :after ORDER BY id LIMIT {BATCH}"
    )
    names = [name.strip() for name in MESSAGE_COLUMNS.split(",")]
    insert = sa.text(
        f"INSERT INTO {MESSAGES} ({MESSAGE_COLUMNS}) "
        f"VALUES ({', '.join(':' + name for name in names)})"
    )
    after = 0
    while rows := bind.execute(select, {"after": after}).all():
        values = []
        for row in rows:
            value = dict(zip(names, row, strict=True))
            value["content_hash"] = bytes.fromhex(value["content_hash"])
            values.append(value)
        bind.execute(insert, values)
        after = rows[-1][0]
