"""`distribute`: spread the schema over a Citus cluster (the implementation of `db distribute`).

Every session-bound table is distributed by the session id (`id` of the sessions table,
`session_id` of the others) and colocated with the sessions table, so all the rows of a
session live in one shard group on one worker; alembic's version table, small and shared,
becomes a reference table (a copy on every node). The keys allow it: every primary key,
unique constraint and foreign key includes the session's key (migration 0008).

Citus distributes a table that is referenced by a foreign key only together with the
tables that reference it, so the foreign keys between sessionstore's tables are set aside
while the tables are distributed, then created again (on the shards too). The database's
triggers (rows written once, see migrations 0001-0006) go with the tables: Citus runs them
on the shards when `citus.enable_unsafe_triggers` is on, which is set for this work and,
as the triggers fire on every write, for the database.

Running it again does nothing; a table already distributed is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sessionstore.errors import SchemaError
from sessionstore.store._schema import VERSION_TABLE, _connection, check
from sessionstore.store._tables import LOOP_ID_INDEX, metadata

__all__ = ["DISTRIBUTION_COLUMNS", "REFERENCE_TABLES", "Distribution", "distribute"]

SESSIONS = "sessionstore_sessions"

DISTRIBUTION_COLUMNS: dict[str, str] = {
    table.name: ("id" if table.name == SESSIONS else "session_id")
    for table in metadata.sorted_tables
}
"""Each distributed table (parents first) and its distribution column."""

REFERENCE_TABLES = (VERSION_TABLE,)
"""Small tables every node holds whole."""

# Migration 0004's check (0008's keys) that a deleted row's session is gone, made to run on a
# shard: there the session's rows are in the colocated shard of the sessions table, on the
# same node (the distributed table's name would send the query, and the statement's
# transition table, to another node). On a table that is not a shard it is 0008's check.
REFUSE_DELETE = f"""
CREATE OR REPLACE FUNCTION sessionstore_refuse_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    sessions regclass := '{SESSIONS}'::regclass;
    one text;
    found boolean;
BEGIN
    IF TG_TABLE_NAME ~ '_[0-9]+$' THEN
        SELECT session_id INTO one FROM deleted_rows LIMIT 1;
        IF one IS NULL THEN
            RETURN NULL;
        END IF;
        sessions := shard_name(
            '{SESSIONS}'::regclass,
            get_shard_id_for_distribution_column('{SESSIONS}', one)
        )::regclass;
    END IF;
    -- A cascade from deleting the session runs after the session row is gone.
    EXECUTE format(
        'SELECT EXISTS (SELECT 1 FROM %s s WHERE (s.id, s.app_name, s.user_id) IN '
        '(SELECT DISTINCT session_id, app_name, user_id FROM deleted_rows))', sessions
    ) INTO found;
    IF found THEN
        RAISE EXCEPTION 'sessionstore: rows of % are immutable (DELETE refused: '
            'delete the whole session instead)', TG_TABLE_NAME
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END;
$$
"""


@dataclass
class Distribution:
    """What `distribute` found and did."""

    citus_version: str
    shard_count: int
    distributed: list[str] = field(default_factory=list)
    """The tables distributed by this run (empty when the schema already was)."""
    referenced: list[str] = field(default_factory=list)
    """The tables made reference tables by this run."""
    workers: int = 0


async def distribute(
    url_or_engine: str | URL | AsyncEngine, *, shard_count: int | None = None
) -> Distribution:
    """Distribute the schema on a Citus coordinator; do nothing for what already is.

    Args:
        url_or_engine: The coordinator's database, at the newest schema revision.
        shard_count: Shards of the session tables (Citus's `citus.shard_count`, 32, by
            default); only used when the sessions table is distributed by this run.

    Raises:
        SchemaError: the database is not a Citus coordinator (no `citus` extension), or
            its schema is not at the newest revision (run `db upgrade` first).
        ValueError: `shard_count` is below 1.
    """
    if shard_count is not None and not 1 <= shard_count <= 64_000:
        raise ValueError("shard_count must be between 1 and 64000")
    await check(url_or_engine)
    async with _connection(url_or_engine, "distributing the schema failed") as connection:
        done: Distribution = await connection.run_sync(_distribute, shard_count)
        await connection.commit()
        return done


def _distribute(db: Connection, shard_count: int | None) -> Distribution:
    version = db.execute(
        text("SELECT extversion FROM pg_extension WHERE extname = 'citus'")
    ).scalar()
    if version is None:
        raise SchemaError(
            "this database is not a Citus coordinator (no citus extension): run "
            "`CREATE EXTENSION citus` there and add its workers (citus_add_node) first"
        )
    partitions = db.execute(
        text("SELECT logicalrelid::regclass::text, partmethod FROM pg_dist_partition")
    ).all()
    known = {str(table): str(method) for table, method in partitions}
    done = Distribution(citus_version=str(version), shard_count=0)
    database = db.execute(text("SELECT current_database()")).scalar_one()
    db.execute(text(f'ALTER DATABASE "{database}" SET citus.enable_unsafe_triggers = on'))
    db.execute(text("SET LOCAL citus.enable_unsafe_triggers = on"))
    # Distributing tables that reference each other in one transaction needs the shards
    # created over one connection per node.
    db.execute(text("SET LOCAL citus.multi_shard_modify_mode = 'sequential'"))
    missing = [table for table in DISTRIBUTION_COLUMNS if table not in known]
    if missing:
        # A unique index without the distribution column cannot be distributed (0015).
        db.execute(text(f"DROP INDEX IF EXISTS {LOOP_ID_INDEX}"))
        keys = _foreign_keys(db)
        for table, name, _ in keys:
            db.execute(text(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"'))
        for table in missing:
            column = DISTRIBUTION_COLUMNS[table]
            if table == SESSIONS:
                count = "" if shard_count is None else f", shard_count => {int(shard_count)}"
                db.execute(text(f"SELECT create_distributed_table('{table}', '{column}'{count})"))
            else:
                db.execute(
                    text(
                        f"SELECT create_distributed_table('{table}', '{column}', "
                        f"colocate_with => '{SESSIONS}')"
                    )
                )
            done.distributed.append(table)
        for table, name, definition in keys:
            db.execute(text(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'))
    db.execute(text(REFUSE_DELETE))
    for table in REFERENCE_TABLES:
        if table not in known:
            db.execute(text(f"SELECT create_reference_table('{table}')"))
            done.referenced.append(table)
    done.shard_count = int(
        db.execute(
            text("SELECT shard_count FROM citus_tables WHERE table_name = CAST(:t AS regclass)"),
            {"t": SESSIONS},
        ).scalar_one()
    )
    done.workers = int(
        db.execute(
            text("SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0")
        ).scalar_one()
    )
    return done


def _foreign_keys(db: Connection) -> list[tuple[str, str, str]]:
    """The foreign keys between sessionstore's tables: (table, name, definition)."""
    rows = db.execute(
        text(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
            "FROM pg_constraint WHERE contype = 'f' AND conrelid::regclass::text = ANY(:t) "
            "ORDER BY conrelid::regclass::text, conname"
        ),
        {"t": list(DISTRIBUTION_COLUMNS)},
    ).all()
    return [(table, name, definition) for table, name, definition in rows]
