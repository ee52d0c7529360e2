"""Each pytest-xdist worker has a PostgreSQL database of its own (tests/conftest.py).

The default run is spread over one process per core; two workers wiping one database
would delete each other's rows mid-test. A worker's `SESSIONSTORE_TEST_POSTGRES_URL`
names `<database>_<worker>`, which exists, and the `db_url` fixture hands it out.
"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from sessionstore import make_engine
from tests.conftest import POSTGRES_ENV, WORKER_ENV, _worker_url, postgres_url


def test_a_workers_database_is_named_after_the_configured_one() -> None:
    url = "postgresql+asyncpg://user:secret@db.example:5433/test"
    mine = _worker_url(url, "gw3")
    assert (mine.database, mine.host, mine.port, mine.password) == (
        "test_gw3",
        "db.example",
        5433,
        "secret",
    )


async def test_this_worker_uses_a_database_of_its_own() -> None:
    worker = os.environ.get(WORKER_ENV)
    if worker is None:
        pytest.skip("not run by a pytest-xdist worker (-n 0)")
    db_url = postgres_url()  # what the `db_url` fixture hands out (skips without one)
    database = make_url(db_url).database
    assert database is not None
    assert database.endswith(f"_{worker}")
    assert make_url(os.environ[POSTGRES_ENV]).database == database  # for the processes too
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            assert await conn.scalar(text("SELECT current_database()")) == database
    finally:
        await engine.dispose()
