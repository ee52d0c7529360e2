"""alembic environment for sessionstore.

`sessionstore.migrate` passes an open connection in `config.attributes["connection"]`;
from a checkout (`alembic upgrade head`) the URL comes from `-x url=...`,
`SESSIONSTORE_URL`, or the embedded default.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection

from sessionstore.store._engine import DEFAULT_URL, make_engine
from sessionstore.store._tables import include_object, schema_metadata

VERSION_TABLE = "sessionstore_alembic_version"

config = context.config
target_metadata = schema_metadata()


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        include_object=include_object,
        version_table=VERSION_TABLE,
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_from_url(url: str) -> None:
    engine = make_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_configure)
            await connection.commit()
    finally:
        await engine.dispose()


def _url() -> str:
    x_args = context.get_x_argument(as_dictionary=True)
    return x_args.get("url") or os.environ.get("SESSIONSTORE_URL") or DEFAULT_URL


if context.is_offline_mode():
    raise SystemExit("sessionstore migrations run online only (they create triggers)")

connection = config.attributes.get("connection")
if connection is not None:
    _configure(connection)
else:
    asyncio.run(_run_from_url(_url()))
