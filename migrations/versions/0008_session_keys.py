"""Session keys for distribution: session ids per tenant, every key scoped by the session.

Revision ID: 0008_session_keys
Revises: 0007_delete_paths
Create Date: 2026-11-25

What changes: a session is keyed by `(id, app_name, user_id)`, so two tenants can use the
same session id. Every other table gains `app_name` and `user_id` beside `session_id` (the
session's key), and its primary key, unique constraints and foreign keys include that key:
`(id, session_id, app_name, user_id)` for a row, foreign keys to a session or to a row of
the same session. So each table can be distributed by `session_id` and colocated with the
others (`sessionstore db distribute`). On SQLite, which numbers only a one-column INTEGER
PRIMARY KEY, `id` stays the primary key and a unique constraint `uq_<table>_sqlite_key` on
the keyed columns is what foreign keys reference. The triggers that refuse deleting or
replacing one row (0004) match rows by the new keys.

Data step: every row takes its session's `app_name` and `user_id`. PostgreSQL alters the
tables in place (the UPDATE triggers set aside meanwhile). SQLite rebuilds each table
(renamed aside, created anew, rows copied with their ids, then the old one dropped, leaf
tables first): alembic's batch mode cannot be used, because it drops a table that others
still reference, and with foreign keys on (they cannot be turned off inside the migration's
transaction) that deletes their rows by cascade. Indexes, triggers, the FTS5 tables (ids
are kept, so the search index stays valid) and the AUTOINCREMENT counters carry over.

Downgrade: back to global session ids; refused with a clear error while two tenants use
the same session id (their rows could not be told apart). No row is lost.

0007_delete_paths (SQLite) detaches a session's loops before its deletion cascades: that
trigger is made to find the loops by the session's whole key. 0007's indexes on the columns
that reference a loop, block, section or message are kept as they are (PostgreSQL alters
in place; SQLite creates them again after the rebuild).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sessionstore.errors import SchemaError

revision: str = "0008_session_keys"
down_revision: str | None = "0007_delete_paths"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SESSIONS = "sessionstore_sessions"
LOOPS = "sessionstore_loops"
MESSAGES = "sessionstore_messages"
BLOCKS = "sessionstore_blocks"
SECTIONS = "sessionstore_block_sections"
TENANT = ("app_name", "user_id")
KEY = ("session_id", *TENANT)

# Frozen here: each session-bound table (parents first) with its unique keys within a
# session (name suffix: columns) and its references to rows of the same session.
CHILDREN: dict[str, tuple[dict[str, tuple[str, ...]], dict[str, str]]] = {
    LOOPS: ({"sequence": ("sequence",)}, {"parent_loop_id": LOOPS}),
    MESSAGES: (
        {"position": ("loop_id", "position"), "client_id": ("client_id",)},
        {"loop_id": LOOPS},
    ),
    BLOCKS: ({"generation": ("loop_id", "overlay", "generation")}, {"loop_id": LOOPS}),
    SECTIONS: ({"kind": ("block_id", "kind")}, {"block_id": BLOCKS}),
    "sessionstore_section_messages": (
        {"position": ("section_id", "position")},
        {"section_id": SECTIONS},
    ),
    "sessionstore_compaction_events": ({}, {"loop_id": LOOPS, "block_id": BLOCKS}),
    "sessionstore_digests": ({}, {"head_loop_id": LOOPS, "through_loop_id": LOOPS}),
    "sessionstore_usage": (
        {"message_id": ("message_id",)},
        {"loop_id": LOOPS, "message_id": MESSAGES},
    ),
}
TABLES = (SESSIONS, *CHILDREN)
DETACH_TRIGGER = "sessionstore_sessions_detach_loops"
"""0007_delete_paths's trigger on SQLite, which finds a session's loops by its key."""


def _uniques(table: str, keyed: bool) -> list[tuple[str, list[str]]]:
    """The unique constraints of a child table: (name, columns)."""
    found = []
    for name, columns in CHILDREN[table][0].items():
        if keyed:
            found.append((f"uq_{table}_{name}", [*KEY, *columns]))
        else:
            found.append((f"uq_{table}_session_id_{'_'.join(columns)}", ["session_id", *columns]))
    return found


def _foreign_keys(table: str, keyed: bool) -> list[tuple[str, list[str], str, list[str]]]:
    """The foreign keys of a child table: (name, columns, referred table, referred columns)."""
    session = (
        (f"fk_{table}_session_id", list(KEY), SESSIONS, ["id", *TENANT])
        if keyed
        else (f"fk_{table}_session_id", ["session_id"], SESSIONS, ["id"])
    )
    found = [session]
    for column, target in CHILDREN[table][1].items():
        if keyed:
            found.append((f"fk_{table}_{column}", [column, *KEY], target, ["id", *KEY]))
        else:
            found.append((f"fk_{table}_{column}", [column], target, ["id"]))
    return found


def _primary_key(table: str, keyed: bool) -> list[str]:
    if table == SESSIONS:
        return ["id", *TENANT] if keyed else ["id"]
    return ["id", *KEY] if keyed else ["id"]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _postgres(keyed=True)
    else:
        _sqlite(keyed=True)


def downgrade() -> None:
    bind = op.get_bind()
    shared = bind.execute(
        sa.text(f"SELECT id FROM {SESSIONS} GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 1")
    ).scalar()
    if shared is not None:
        raise SchemaError(
            f"cannot downgrade below {revision}: session id {shared!r} is used by more than "
            "one tenant, and before this revision session ids are global; delete or export "
            "one of those sessions first"
        )
    if bind.dialect.name == "postgresql":
        _postgres(keyed=False)
    else:
        _sqlite(keyed=False)


# ── PostgreSQL: altered in place ────────────────────────────────────────────────────


def _postgres(keyed: bool) -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    for table in reversed(CHILDREN):
        for fk in inspector.get_foreign_keys(table):
            op.drop_constraint(fk["name"], table, type_="foreignkey")
    for table in reversed(TABLES):
        if table != SESSIONS:
            for unique in inspector.get_unique_constraints(table):
                op.drop_constraint(unique["name"], table, type_="unique")
        op.drop_constraint(f"pk_{table}", table, type_="primary")
    if keyed:
        columns = {c["name"]: c["type"] for c in inspector.get_columns(SESSIONS)}
        for table in CHILDREN:
            for name in TENANT:
                op.add_column(table, sa.Column(name, columns[name], nullable=True))
            # Rows are written once: their UPDATE triggers are set aside for this step.
            op.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            op.execute(
                f"UPDATE {table} AS t SET app_name = s.app_name, user_id = s.user_id "
                f"FROM {SESSIONS} AS s WHERE s.id = t.session_id"
            )
            op.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
            for name in TENANT:
                op.alter_column(table, name, nullable=False)
    else:
        for table in CHILDREN:
            for name in TENANT:
                op.drop_column(table, name)
    for table in TABLES:
        op.create_primary_key(f"pk_{table}", table, _primary_key(table, keyed))
    for table in CHILDREN:
        for name, columns in _uniques(table, keyed):
            op.create_unique_constraint(name, table, columns)
        for name, columns, target, referred in _foreign_keys(table, keyed):
            op.create_foreign_key(name, table, target, columns, referred, ondelete="CASCADE")
    op.execute(_refuse_delete_function(keyed))


def _refuse_delete_function(keyed: bool) -> str:
    """0004's check that a deleted row's session is gone, by the session's key."""
    match = (
        "(id, app_name, user_id) IN (SELECT DISTINCT session_id, app_name, user_id "
        "FROM deleted_rows)"
        if keyed
        else "id IN (SELECT DISTINCT session_id FROM deleted_rows)"
    )
    return f"""
        CREATE OR REPLACE FUNCTION sessionstore_refuse_delete() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            -- A cascade from deleting the session runs after the session row is gone.
            IF EXISTS (SELECT 1 FROM {SESSIONS} WHERE {match}) THEN
                RAISE EXCEPTION 'sessionstore: rows of % are immutable (DELETE refused: '
                    'delete the whole session instead)', TG_TABLE_NAME
                    USING ERRCODE = 'integrity_constraint_violation';
            END IF;
            RETURN NULL;
        END;
        $$
        """


# ── SQLite: each table rebuilt ──────────────────────────────────────────────────────


def _sqlite(keyed: bool) -> None:
    bind = op.get_bind()
    names = ", ".join(f"'{table}'" for table in TABLES)
    schema = bind.execute(
        sa.text(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            f"WHERE type IN ('trigger', 'index') AND sql IS NOT NULL AND tbl_name IN ({names})"
        )
    ).all()
    creates = dict(
        bind.execute(
            sa.text(
                f"SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN ({names})"
            )
        ).all()
    )
    counters = dict(bind.execute(sa.text("SELECT name, seq FROM sqlite_sequence")).all())
    for kind, name, _, _ in schema:
        op.execute(f'DROP {kind.upper()} "{name}"')
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
    inspector = sa.inspect(bind)
    for table in TABLES:
        _create_sqlite_table(inspector, table, keyed, "AUTOINCREMENT" in creates[table].upper())
        _copy(bind, inspector, table, keyed)
        if table in counters:
            op.execute(
                sa.text("UPDATE sqlite_sequence SET seq = :seq WHERE name = :name").bindparams(
                    seq=counters[table], name=table
                )
            )
            op.execute(
                sa.text(
                    "INSERT INTO sqlite_sequence (name, seq) SELECT :name, :seq "
                    "WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = :name)"
                ).bindparams(seq=counters[table], name=table)
            )
    for table in reversed(TABLES):
        op.execute(f"DROP TABLE {table}_old")
    for kind, _, _, sql in schema:
        if kind == "index":
            op.execute(sql)
    for kind, name, table, sql in schema:
        if kind != "trigger":
            continue
        if name == DETACH_TRIGGER:
            op.execute(_detach_trigger(keyed))
        elif name == f"{table}_no_delete":
            op.execute(_no_delete_trigger(table, keyed))
        elif name == f"{table}_no_replace":
            op.execute(_no_replace_trigger(table, keyed))
        else:
            op.execute(sql)


def _create_sqlite_table(
    inspector: sa.Inspector, table: str, keyed: bool, autoincrement: bool
) -> None:
    old = inspector.get_columns(f"{table}_old")
    columns = []
    for column in old:
        if column["name"] in TENANT and table != SESSIONS:
            continue
        if column["name"] == "id" and table != SESSIONS:
            columns.append(sa.Column("id", sa.Integer(), primary_key=True, nullable=False))
            continue
        columns.append(sa.Column(column["name"], column["type"], nullable=column["nullable"]))
    constraints: list[sa.Constraint] = []
    if table == SESSIONS:
        constraints.append(sa.PrimaryKeyConstraint(*_primary_key(table, keyed), name=f"pk_{table}"))
    else:
        if keyed:
            tenant = {c["name"]: c["type"] for c in inspector.get_columns(f"{SESSIONS}_old")}
            columns += [sa.Column(name, tenant[name], nullable=False) for name in TENANT]
            constraints.append(sa.UniqueConstraint("id", *KEY, name=f"uq_{table}_sqlite_key"))
        for name, keys in _uniques(table, keyed):
            constraints.append(sa.UniqueConstraint(*keys, name=name))
        for name, keys, target, referred in _foreign_keys(table, keyed):
            constraints.append(
                sa.ForeignKeyConstraint(
                    keys, [f"{target}.{c}" for c in referred], name=name, ondelete="CASCADE"
                )
            )
    op.create_table(table, *columns, *constraints, sqlite_autoincrement=autoincrement)


def _copy(bind: sa.Connection, inspector: sa.Inspector, table: str, keyed: bool) -> None:
    names = [c["name"] for c in inspector.get_columns(table)]
    if table == SESSIONS or not keyed:
        listed = ", ".join(names)
        op.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {table}_old ORDER BY id")
        return
    picked = ", ".join(f"s.{c}" if c in TENANT else f"o.{c}" for c in names)
    op.execute(
        f"INSERT INTO {table} ({', '.join(names)}) SELECT {picked} FROM {table}_old AS o "
        f"JOIN {SESSIONS}_old AS s ON s.id = o.session_id ORDER BY o.id"
    )


def _detach_trigger(keyed: bool) -> str:
    """0007's trigger (SQLite): a session's loops are detached before its cascade runs."""
    match = "session_id = OLD.id"
    if keyed:
        match += " AND app_name = OLD.app_name AND user_id = OLD.user_id"
    return (
        f"CREATE TRIGGER {DETACH_TRIGGER} BEFORE DELETE ON {SESSIONS} BEGIN "
        f"UPDATE {LOOPS} SET parent_loop_id = NULL "
        f"WHERE {match} AND parent_loop_id IS NOT NULL; END"
    )


def _no_delete_trigger(table: str, keyed: bool) -> str:
    """0004's trigger: a row is deleted only with its session."""
    columns = _primary_key(SESSIONS, keyed)
    match = " AND ".join(
        f"{column} = OLD.{key}" for column, key in zip(columns, KEY[: len(columns)], strict=True)
    )
    return (
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"WHEN EXISTS (SELECT 1 FROM {SESSIONS} WHERE {match}) "
        f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {table} are immutable "
        "(DELETE refused: delete the whole session instead)'); END"
    )


def _no_replace_trigger(table: str, keyed: bool) -> str:
    """0004's trigger: an INSERT that would replace a row (same id or unique key) is refused."""
    keys = [columns for _, columns in _uniques(table, keyed)]
    same = [" AND ".join(f"{table}.{c} = NEW.{c}" for c in columns) for columns in keys]
    conflicts = " OR ".join([f"{table}.id = NEW.id", *(f"({s})" for s in same)])
    return (
        f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
        f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {conflicts}) "
        f"BEGIN SELECT RAISE(ABORT, 'sessionstore: rows of {table} are immutable "
        "(INSERT OR REPLACE refused)'); END"
    )
