"""Shared fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL tests read `SESSIONSTORE_TEST_POSTGRES_URL` (for example
`postgresql+asyncpg://postgres@127.0.0.1:5432/test`) and are skipped when it is unset;
`.ci/run` always sets it and fails if they were skipped. Each backend is migrated once
per run (the schema comes from the migrations, never from `create_all`), then emptied
between tests.

With `SESSIONSTORE_TEST_CITUS=1`, the PostgreSQL tests of `store` and `db_url` run on a
local Citus cluster instead (a coordinator and two workers, `tests/citus_cluster.py`),
whose schema is migrated and then distributed (`migrate.distribute`).

The default run is spread over processes by pytest-xdist (`-n auto` in `pyproject.toml`).
Each worker (`gw0`, `gw1`, ...) gets a PostgreSQL database of its own, named after the
one `SESSIONSTORE_TEST_POSTGRES_URL` names (`test` → `test_gw0`), created through the
server's `postgres` database when missing and wiped like it; the worker's environment
variable is set to it, so the processes a test starts use it too. SQLite files live under
each worker's own temporary directory. Citus runs are serial (`-n 0`): one cluster.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL, make_url

from sessionstore import SessionStore, make_engine, migrate
from tests.citus_cluster import CITUS_ENV, Cluster, citus_installed, start_cluster
from tests.datasets import DATASET, DATASET_LABEL
from tests.factories import reseed_random
from tests.routing import Recorder, violations

POSTGRES_ENV = "SESSIONSTORE_TEST_POSTGRES_URL"
SEED = 20261122
WORKER_ENV = "PYTEST_XDIST_WORKER"

_worker_database_error: str | None = None
"""Why this xdist worker has no PostgreSQL database of its own (the tests needing it fail)."""

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    if _worker_database_error is not None:
        pytest.fail(_worker_database_error, pytrace=False)
    return str(make_url(url).set(drivername="postgresql+asyncpg").render_as_string(False))


def _worker_url(url: str, worker: str) -> URL:
    """The database of one xdist worker: the configured one's name with `_<worker>` added."""
    base = make_url(url)
    return base.set(drivername="postgresql+asyncpg", database=f"{base.database}_{worker}")


async def _create_database(url: URL) -> None:
    """Create `url`'s database through the server's `postgres` database, if it is missing."""
    admin = make_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            found = await conn.scalar(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": url.database}
            )
            if found is None:
                await conn.execute(text(f'CREATE DATABASE "{url.database}"'))
    finally:
        await admin.dispose()


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist worker, point `SESSIONSTORE_TEST_POSTGRES_URL` at the worker's database."""
    global _worker_database_error
    worker = os.environ.get(WORKER_ENV)
    url = os.environ.get(POSTGRES_ENV)
    if not worker or not url or citus_requested():
        return
    mine = _worker_url(url, worker)
    try:
        asyncio.run(_create_database(mine))
    except Exception as exc:  # any failure: the tests that need PostgreSQL say why
        cause = getattr(exc, "orig", None) or exc  # the driver's words, not SQLAlchemy's wrapper
        _worker_database_error = (
            f"xdist worker {worker} could not create its PostgreSQL database "
            f"{mine.database!r} beside the one {POSTGRES_ENV} names: "
            f"{str(cause).splitlines()[0]}. The role needs CREATEDB (or create the database "
            "yourself), or run the tests in one process with `-n 0`."
        )
        return
    os.environ[POSTGRES_ENV] = mine.render_as_string(hide_password=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`slow_on_postgres`: the test's PostgreSQL cases are slow (`-m slow` runs them).

    For tests whose point is a SQLite limit (a chain deeper than its trigger recursion)
    and that take a minute on PostgreSQL: the SQLite case stays in the default run.
    """
    for item in items:
        if item.get_closest_marker("slow_on_postgres") and item.get_closest_marker("postgres"):
            item.add_marker(pytest.mark.slow)


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


def citus_requested() -> bool:
    """Whether this run puts the PostgreSQL tests on a local Citus cluster."""
    return os.environ.get(CITUS_ENV) == "1"


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[Cluster]:
    """A running coordinator with two workers (`SESSIONSTORE_TEST_CITUS=1` only)."""
    if not citus_requested():
        pytest.skip(f"{CITUS_ENV} is not set")
    if not citus_installed():
        pytest.fail("Citus is not installed: run shared/citus/build.sh (see .ci/run)")
    # Not under pytest's own temporary directory: the server user must reach it.
    base = Path(tempfile.mkdtemp(prefix="sessionstore-citus-"))
    base.chmod(0o755)
    cluster = start_cluster(base / "cluster")
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


async def _prepare(
    request: pytest.FixtureRequest, backend: str, sqlite_url: str, migrated: dict[str, str]
) -> str:
    if backend in migrated:
        return migrated[backend]
    if backend == "sqlite":
        url = sqlite_url
    elif citus_requested():
        url = request.getfixturevalue("citus_cluster").url
    else:
        url = postgres_url()
    await migrate.upgrade(url)
    if backend == "postgres" and citus_requested():
        await migrate.distribute(url, shard_count=8)
    migrated[backend] = url
    return url


@pytest.fixture(params=BACKENDS)
async def db_url(request: pytest.FixtureRequest, sqlite_url: str, _migrated: dict[str, str]) -> str:
    """A migrated, empty database URL on each backend."""
    url = await _prepare(request, request.param, sqlite_url, _migrated)
    await _truncate(url)
    return url


@pytest.fixture(scope="session")
def routing_recorder() -> Iterator[Recorder]:
    """Every statement the `store` fixture's PostgreSQL stores send, checked at the end.

    Each must bind the session key (`tests/routing.py`), or belong to one of the calls that
    fan out by design (`FAN_OUT`); a statement that does neither fails the run.
    """
    recorder = Recorder()
    yield recorder
    wrong = violations(recorder.statements)
    if wrong:
        pytest.fail(
            f"{len(wrong)} statements of the store name no session key and no fan-out call:\n"
            + "\n---\n".join(wrong[:5]),
            pytrace=False,
        )


@pytest.fixture
async def store(db_url: str, routing_recorder: Recorder) -> AsyncIterator[SessionStore]:
    """A `SessionStore` on an empty, migrated database, on each backend."""
    kwargs = routing_recorder.engine_kwargs() if db_url.startswith("postgresql") else {}
    async with SessionStore.from_url(db_url, **kwargs) as opened:
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
    if not DATASET.is_dir():
        pytest.skip(f"the real-transcripts dataset is not at {DATASET_LABEL}")
    return DATASET
