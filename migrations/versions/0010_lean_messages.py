"""A leaner message row: SQLite's search text derived from the payload, fewer indexes.

Revision ID: 0010_lean_messages
Revises: 0009_deferred_search_index
Create Date: 2026-11-27

What changes, on both backends:

- the unique key on a message's `client_id` becomes a partial unique index
  (`WHERE client_id IS NOT NULL`, the same name and columns): messages without one (most)
  no longer hold an entry, and PostgreSQL's planner no longer picks it to read a loop;
- `ix_sessionstore_messages_loop_id` is dropped: the loop's foreign key is looked up by
  the position key `(session_id, app_name, user_id, loop_id, position)`;
- `ix_sessionstore_messages_turn` is `(loop_id, turn_index)` and the partial
  `ix_sessionstore_messages_user` `(loop_id, position) WHERE kind = 'user'`: loop ids are
  unique, so the session's id in front of them only made each entry longer;
- the usage table's `ix_sessionstore_usage_loop_id` and `ix_sessionstore_usage_message_id`
  are dropped: `ix_sessionstore_usage_turn` and the message key cover those look-ups;
- the messages' and the usage rows' foreign key to their session
  (`fk_<table>_session_id`) is dropped: each row's foreign key to its loop, which carries
  the session's key, and the loop's to its session keep the same rows valid, and deleting a
  session still deletes them (through its loops). PostgreSQL checked that key once more for
  every inserted row (about a fifth of a batch insert's time).

SQLite only: `sessionstore_messages.search_text` is dropped. The FTS5 index of the raw
messages (filled by the search, 0009) reads its text from the view
`sessionstore_messages_search`, which derives it from the payload with SQLite's JSON
functions (text blocks, tool calls' name and arguments, a tool result's tool name, shell
commands and output, summaries, custom messages' type and data; not thinking or images),
and its AFTER DELETE trigger derives the same text from the deleted row; FTS5's tokenizer
splits the words. The usage table drops its `uq_sessionstore_usage_sqlite_key` (no foreign
key references a usage row). PostgreSQL keeps `search_text`: its generated `search_vector`
is computed from it.

Data step (SQLite): the messages and usage tables are rebuilt (renamed aside, created anew,
rows copied with their ids, the old ones dropped; as 0008 does, because foreign keys
cannot be turned off inside the migration's transaction), their triggers and the
AUTOINCREMENT counters carried over; the search index is rebuilt from the view for the
rows it held. No row is lost.

Downgrade: the 0009 schema; on SQLite `search_text` is filled again from each payload
(`indexed_text`, as 0005 did) and the index rebuilt from it for the rows it held.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sessionstore._search_text import indexed_text
from sessionstore.models import MESSAGE_ADAPTER

revision: str = "0010_lean_messages"
down_revision: str | None = "0009_deferred_search_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MESSAGES = "sessionstore_messages"
USAGE = "sessionstore_usage"
FTS = f"{MESSAGES}_fts"
VIEW = f"{MESSAGES}_search"
KEY = ("session_id", "app_name", "user_id")
INDEXED_THROUGH = f"SELECT coalesce(max(id), 0) FROM {FTS}_docsize"
BATCH = 500


def search_text_sql(payload: str) -> str:
    """SQLite: the text search indexes, derived from a message's stored JSON (frozen here)."""

    def field(path: str) -> str:
        return f"coalesce(json_extract({payload}, '$.{path}'), '')"

    blocks = (
        "coalesce((SELECT group_concat(CASE json_extract(b.value, '$.type') "
        "WHEN 'text' THEN json_extract(b.value, '$.text') "
        "WHEN 'tool_call' THEN json_extract(b.value, '$.name') || ' ' || "
        "json_extract(b.value, '$.arguments') END, char(10)) "
        f"FROM json_each({payload}, '$.content') AS b), '')"
    )
    parts = [
        field("tool_name"),
        blocks,
        *(field(name) for name in ("command", "output", "summary", "custom_type", "data")),
    ]
    return f"substr({' || char(10) || '.join(parts)}, 1, 100000)"


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
    content_hash VARCHAR(64) NOT NULL,
    client_id VARCHAR(255),
    created_at DATETIME NOT NULL,
    {{search_text}}app_name VARCHAR(128) NOT NULL,
    user_id VARCHAR(128) NOT NULL,
    CONSTRAINT uq_{MESSAGES}_sqlite_key UNIQUE (id, session_id, app_name, user_id),
    CONSTRAINT uq_{MESSAGES}_position UNIQUE (session_id, app_name, user_id, loop_id, position),
    {{client_id}}{{session_fk}}CONSTRAINT fk_{MESSAGES}_loop_id
        FOREIGN KEY(loop_id, session_id, app_name, user_id)
        REFERENCES sessionstore_loops (id, session_id, app_name, user_id) ON DELETE CASCADE
)
"""
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
    {{sqlite_key}}CONSTRAINT uq_{USAGE}_message_id
        UNIQUE (session_id, app_name, user_id, message_id),
    {{session_fk}}CONSTRAINT fk_{USAGE}_loop_id FOREIGN KEY(loop_id, session_id, app_name, user_id)
        REFERENCES sessionstore_loops (id, session_id, app_name, user_id) ON DELETE CASCADE,
    CONSTRAINT fk_{USAGE}_message_id FOREIGN KEY(message_id, session_id, app_name, user_id)
        REFERENCES {MESSAGES} (id, session_id, app_name, user_id) ON DELETE CASCADE
)
"""

# Each revision's secondary indexes of the two tables: name -> (table, columns, where).
INDEXES_0009: dict[str, tuple[str, str, str | None]] = {
    f"ix_{MESSAGES}_turn": (MESSAGES, "session_id, loop_id, turn_index", None),
    f"ix_{MESSAGES}_user": (MESSAGES, "session_id, loop_id, position", "kind = 'user'"),
    f"ix_{MESSAGES}_loop_id": (MESSAGES, "loop_id", None),
    f"ix_{USAGE}_turn": (USAGE, "session_id, loop_id, turn_index", None),
    f"ix_{USAGE}_loop_id": (USAGE, "loop_id", None),
    f"ix_{USAGE}_message_id": (USAGE, "message_id", None),
}
INDEXES_0010: dict[str, tuple[str, str, str | None]] = {
    f"ix_{MESSAGES}_turn": (MESSAGES, "loop_id, turn_index", None),
    f"ix_{MESSAGES}_user": (MESSAGES, "loop_id, position", "kind = 'user'"),
    f"ix_{USAGE}_turn": (USAGE, "session_id, loop_id, turn_index", None),
}
CLIENT_ID = f"uq_{MESSAGES}_client_id"


def _session_fk(table: str) -> str:
    """0008's foreign key from a row to its session, which 0010 drops on two tables."""
    return (
        f"CONSTRAINT fk_{table}_session_id FOREIGN KEY(session_id, app_name, user_id) "
        "REFERENCES sessionstore_sessions (id, app_name, user_id) ON DELETE CASCADE"
    )


CLIENT_ID_COLUMNS = "session_id, app_name, user_id, client_id"


def _create_index(name: str, table: str, columns: str, where: str | None) -> None:
    op.execute(f"CREATE INDEX {name} ON {table} ({columns})" + (f" WHERE {where}" if where else ""))


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _postgres(lean=True)
    else:
        _sqlite(lean=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _postgres(lean=False)
    else:
        _sqlite(lean=False)


# ── PostgreSQL: altered in place ────────────────────────────────────────────────────


def _postgres(lean: bool) -> None:
    old, new = (INDEXES_0009, INDEXES_0010) if lean else (INDEXES_0010, INDEXES_0009)
    for name in old:
        op.execute(f"DROP INDEX IF EXISTS {name}")
    for name, (table, columns, where) in new.items():
        _create_index(name, table, columns, where)
    for table in (MESSAGES, USAGE):
        if lean:
            op.execute(f"ALTER TABLE {table} DROP CONSTRAINT fk_{table}_session_id")
        else:
            op.execute(f"ALTER TABLE {table} ADD {_session_fk(table)}")
    if lean:
        op.execute(f"ALTER TABLE {MESSAGES} DROP CONSTRAINT {CLIENT_ID}")
        op.execute(
            f"CREATE UNIQUE INDEX {CLIENT_ID} ON {MESSAGES} ({CLIENT_ID_COLUMNS}) "
            "WHERE client_id IS NOT NULL"
        )
    else:
        op.execute(f"DROP INDEX {CLIENT_ID}")
        op.execute(
            f"ALTER TABLE {MESSAGES} ADD CONSTRAINT {CLIENT_ID} UNIQUE ({CLIENT_ID_COLUMNS})"
        )


# ── SQLite: the two tables rebuilt ──────────────────────────────────────────────────


def _sqlite(lean: bool) -> None:
    bind = op.get_bind()
    tables = f"'{MESSAGES}', '{USAGE}'"
    triggers = bind.execute(
        sa.text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            f"AND tbl_name IN ({tables}) AND name <> '{FTS}_delete'"
        )
    ).all()
    indexes = bind.execute(
        sa.text(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
            f"AND tbl_name IN ({tables})"
        )
    ).all()
    counters = dict(bind.execute(sa.text("SELECT name, seq FROM sqlite_sequence")).all())
    through = bind.execute(sa.text(INDEXED_THROUGH)).scalar_one()
    for name, _ in triggers:
        op.execute(f'DROP TRIGGER "{name}"')
    op.execute(f"DROP TRIGGER IF EXISTS {FTS}_delete")
    for (name,) in indexes:
        op.execute(f'DROP INDEX "{name}"')
    op.execute(f"DROP TABLE {FTS}")
    op.execute(f"DROP VIEW IF EXISTS {VIEW}")
    # Leaf first: usage references the messages.
    op.execute(f"ALTER TABLE {USAGE} RENAME TO {USAGE}_old")
    op.execute(f"ALTER TABLE {MESSAGES} RENAME TO {MESSAGES}_old")
    client_id = "" if lean else f"CONSTRAINT {CLIENT_ID} UNIQUE ({CLIENT_ID_COLUMNS}),\n    "
    op.execute(
        CREATE_MESSAGES.format(
            search_text="" if lean else "search_text TEXT,\n    ",
            client_id=client_id,
            session_fk="" if lean else f"{_session_fk(MESSAGES)},\n    ",
        )
    )
    op.execute(
        f"INSERT INTO {MESSAGES} ({MESSAGE_COLUMNS}) "
        f"SELECT {MESSAGE_COLUMNS} FROM {MESSAGES}_old ORDER BY id"
    )
    sqlite_key = (
        ""
        if lean
        else f"CONSTRAINT uq_{USAGE}_sqlite_key UNIQUE (id, session_id, app_name, user_id),\n    "
    )
    op.execute(
        CREATE_USAGE.format(
            sqlite_key=sqlite_key, session_fk="" if lean else f"{_session_fk(USAGE)},\n    "
        )
    )
    op.execute(
        f"INSERT INTO {USAGE} ({USAGE_COLUMNS}) SELECT {USAGE_COLUMNS} FROM {USAGE}_old ORDER BY id"
    )
    for table in (MESSAGES, USAGE):
        if table in counters:
            op.execute(
                sa.text(
                    "INSERT OR REPLACE INTO sqlite_sequence (rowid, name, seq) "
                    "SELECT (SELECT rowid FROM sqlite_sequence WHERE name = :name), :name, :seq"
                ).bindparams(name=table, seq=counters[table])
            )
    op.execute(f"DROP TABLE {USAGE}_old")
    op.execute(f"DROP TABLE {MESSAGES}_old")
    for name, (table, columns, where) in (INDEXES_0010 if lean else INDEXES_0009).items():
        _create_index(name, table, columns, where)
    if lean:
        op.execute(
            f"CREATE UNIQUE INDEX {CLIENT_ID} ON {MESSAGES} ({CLIENT_ID_COLUMNS}) "
            "WHERE client_id IS NOT NULL"
        )
    for _, create in triggers:
        op.execute(create)
    if lean:
        op.execute(
            f"CREATE VIEW {VIEW} (id, search_text) AS SELECT id, "
            f"{search_text_sql('payload')} FROM {MESSAGES}"
        )
        content, text = VIEW, search_text_sql("OLD.payload")
    else:
        _backfill(bind)
        content, text = MESSAGES, "OLD.search_text"
    op.execute(
        f"CREATE VIRTUAL TABLE {FTS} USING fts5(search_text, content='{content}', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 0')"
    )
    # The rows the index held before (the rest are indexed by the next search, 0009).
    op.execute(
        sa.text(
            f"INSERT INTO {FTS}(rowid, search_text) SELECT id, search_text FROM {content} "
            "WHERE id <= :through ORDER BY id"
        ).bindparams(through=through)
    )
    op.execute(
        f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {MESSAGES} "
        f"WHEN OLD.id <= ({INDEXED_THROUGH}) BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, search_text) "
        f"VALUES ('delete', OLD.id, {text}); END"
    )


def _backfill(bind: sa.Connection) -> None:
    """Write `search_text` of every message again (the downgrade), as 0005 did."""
    select = sa.text(
        f"SELECT id, payload FROM {MESSAGES} WHERE id > :after ORDER BY id LIMIT {BATCH}"
    )
    update = sa.text(f"UPDATE {MESSAGES} SET search_text = :text WHERE id = :id")
    triggers = bind.execute(
        sa.text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            f"AND name = '{MESSAGES}_no_update'"
        )
    ).all()
    for name, _ in triggers:
        op.execute(f'DROP TRIGGER "{name}"')
    after = 0
    while rows := bind.execute(select, {"after": after}).all():
        values = [
            {"id": row_id, "text": indexed_text(MESSAGE_ADAPTER.validate_json(payload))}
            for row_id, payload in rows
        ]
        bind.execute(update, values)
        after = rows[-1][0]
    for _, create in triggers:
        op.execute(create)
