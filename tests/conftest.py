"""Shared fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL tests read `SESSIONSTORE_TEST_POSTGRES_URL` (for example
`postgresql+asyncpg://postgres@127.0.0.1:5432/test`) and are skipped when it is unset;
`.ci/run` always sets it and fails if they were skipped. Each backend is migrated once
per run (the schema comes from the migrations, never from `create_all`), then emptied
between tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from sessionstore import SessionStore, make_engine, migrate
from tests.factories import reseed_random

POSTGRES_ENV = "SESSIONSTORE_TEST_POSTGRES_URL"
SEED = 20261122

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    return str(make_url(url).set(drivername="postgresql+asyncpg").render_as_string(False))


@pytest.fixture(autouse=True)
def _seed_factories() -> None:
    reseed_random(SEED)


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('db') / 'store.db'}"


@pytest.fixture(scope="session")
async def _migrated(sqlite_url: str) -> dict[str, str]:
    """Backends already migrated in this run, by name."""
    return {}


async def _prepare(backend: str, sqlite_url: str, migrated: dict[str, str]) -> str:
    url = sqlite_url if backend == "sqlite" else postgres_url()
    if backend not in migrated:
        await migrate.upgrade(url)
        migrated[backend] = url
    return url


@pytest.fixture(params=BACKENDS)
async def db_url(request: pytest.FixtureRequest, sqlite_url: str, _migrated: dict[str, str]) -> str:
    """A migrated, empty database URL on each backend."""
    url = await _prepare(request.param, sqlite_url, _migrated)
    await _truncate(url)
    return url


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SessionStore]:
    """A `SessionStore` on an empty, migrated database, on each backend."""
    async with SessionStore.from_url(db_url) as opened:
        yield opened


async def _truncate(url: str) -> None:
    engine = make_engine(url)
    try:
        async with engine.begin() as conn:
            # Every table cascades from sessions.
            await conn.execute(text("DELETE FROM sessionstore_sessions"))
    finally:
        await engine.dispose()


@pytest.fixture(params=BACKENDS)
async def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A brand-new database with no tables, on each backend (for migration tests)."""
    if request.param == "sqlite":
        # An empty file is an empty SQLite database (commands other than `db upgrade`
        # refuse a path with no file at all).
        (tmp_path / "empty.db").touch()
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        return
    base = make_url(postgres_url())
    name = f"sessionstore_test_{uuid.uuid4().hex[:12]}"
    admin = make_engine(base, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


@pytest.fixture
def dataset_dir() -> Path:
    """The shared real-transcripts dataset (skips when the checkout has no shared/ beside it)."""
    path = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "real-transcripts"
    if not path.is_dir():
        pytest.skip("the shared real-transcripts dataset is not beside this checkout")
    return path
