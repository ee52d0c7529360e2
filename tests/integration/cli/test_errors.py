"""The command line's error paths: a clear message and a non-zero exit, never a traceback.

Issue 10, defects 10 and 13: an unreachable PostgreSQL server, a database migrated by a
newer sessionstore, a mistyped SQLite path (which must not create a database), and a
database on read-only media (which must be readable, and is never written by a read).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shlex
import shutil
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from sessionstore import SchemaError, SessionStore, StorageError, make_engine, migrate
from tests.conftest import postgres_url
from tests.integration.cli.runner import SMALL, fails, ok, write_jsonl

READS = (["sessions", "list"], ["db", "current"], ["db", "check"], ["export", "small-1"])


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("postgresql+asyncpg://postgres@127.0.0.1:{port}/x", id="refused"),
        pytest.param("postgresql+asyncpg://postgres@no-such-host.invalid/x", id="unknown-host"),
    ],
)
@pytest.mark.parametrize("args", [["sessions", "list"], ["db", "upgrade"], ["db", "check"]])
def test_an_unreachable_server_is_a_clear_error(url: str, args: list[str]) -> None:
    # A port bound and never listened on refuses connections; held for the call, no
    # other process of the run (a test server, a Citus node) can listen on it meanwhile.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        result = fails(url.format(port=probe.getsockname()[1]), *args)
    assert result.exit_code == 1
    assert "cannot connect to the database" in result.stderr
    assert "check the host, port" in result.stderr


@pytest.mark.postgres
def test_an_ssl_upgrade_the_server_refuses_is_a_clear_error() -> None:
    url = postgres_url()
    if "?" in url:
        pytest.skip("the test server URL already has options")

    async def server_has_ssl() -> bool:
        engine = make_engine(url)
        try:
            async with engine.connect() as conn:
                return bool((await conn.execute(text("SHOW ssl"))).scalar_one() == "on")
        finally:
            await engine.dispose()

    if asyncio.run(server_has_ssl()):
        pytest.skip("the test server accepts SSL")
    result = fails(f"{url}?ssl=require", "sessions", "list")
    assert "cannot connect to the database" in result.stderr
    assert "SSL" in result.stderr


async def test_the_library_raises_storage_error_when_it_cannot_connect() -> None:
    with socket.socket() as probe:  # bound, never listened on: refused (see above)
        probe.bind(("127.0.0.1", 0))
        url = f"postgresql+asyncpg://postgres@127.0.0.1:{probe.getsockname()[1]}/x"
        async with SessionStore.from_url(url) as store:
            with pytest.raises(StorageError, match="cannot connect"):
                await store.list_sessions()
        with pytest.raises(StorageError, match="cannot connect"):
            await migrate.current(url)


def test_a_database_newer_than_the_package_is_refused_clearly(empty_db_url: str) -> None:
    async def migrate_to_the_future() -> None:
        await migrate.upgrade(empty_db_url)
        engine = make_engine(empty_db_url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '0999_future'")
                )
        finally:
            await engine.dispose()

    asyncio.run(migrate_to_the_future())
    for args in (["db", "upgrade"], ["db", "check"], ["sessions", "list"]):
        result = fails(empty_db_url, *args)
        assert result.exit_code == 1
        assert "0999_future" in result.stderr
        assert "upgrade the sessionstore package" in result.stderr
    assert ok(empty_db_url, "db", "current").stdout.strip() == "0999_future"
    with pytest.raises(SchemaError, match="does not know"):
        asyncio.run(migrate.upgrade(empty_db_url))


@pytest.mark.parametrize("args", [*READS, ["sessions", "delete", "x", "--yes"]])
def test_a_mistyped_sqlite_path_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "mistyped.db"
    result = fails(f"sqlite+aiosqlite:///{missing}", *args)
    assert f"no SQLite database at {missing}" in result.stderr
    assert "sessionstore db upgrade" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_upgrade_into_a_missing_directory_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "agents.db"
    result = fails(f"sqlite+aiosqlite:///{missing}", "db", "upgrade")
    assert f"the directory {missing.parent} does not exist" in result.stderr
    assert list(tmp_path.iterdir()) == []


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    """A SQLite database holding one imported session, in rollback-journal mode.

    (A database copied to read-only media is often in that mode: switching it to WAL, as
    opening it for writing does, is a write.)
    """
    path = tmp_path / "small.db"
    ok(
        f"sqlite+aiosqlite:///{path}",
        "import",
        "--upgrade",
        str(write_jsonl(tmp_path / "s.jsonl", [SMALL])),
    )
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    for extra in tmp_path.glob("small.db-*"):
        extra.unlink()
    return path


@pytest.mark.parametrize("mode", ["mode=ro", "immutable=1"])
def test_a_read_only_url_reads_without_writing(small_db: Path, mode: str) -> None:
    """`mode=ro` and `immutable=1` (read-only media) URLs work for every read.

    Before: opening switched the journal to WAL, "attempt to write a readonly database".
    """
    before = _digest(small_db)
    url = f"sqlite+aiosqlite:///file:{small_db}?{mode}&uri=true"
    for args in READS:
        ok(url, *args)
    assert "small-1" in ok(url, "sessions", "list").stdout
    assert _digest(small_db) == before
    result = fails(url, "sessions", "delete", "small-1", "--yes")
    assert "readonly" in result.stderr
    assert _digest(small_db) == before


def test_reading_commands_never_write_the_database(small_db: Path) -> None:
    """The reading commands open a SQLite file read-only: the file keeps its bytes."""
    before = _digest(small_db)
    url = f"sqlite+aiosqlite:///{small_db}"
    for args in (
        *READS,
        ["sessions", "show", "small-1"],
        ["context", "small-1", "--budget", "500"],
    ):
        ok(url, *args)
    assert _digest(small_db) == before
    with sqlite3.connect(small_db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_a_read_only_file_in_a_read_only_directory_can_be_read(small_db: Path) -> None:
    """Read-only media, as far as permissions can show it (root ignores them: see below)."""
    small_db.chmod(0o444)
    small_db.parent.chmod(0o555)
    try:
        assert "small-1" in ok(f"sqlite+aiosqlite:///{small_db}", "sessions", "list").stdout
    finally:
        small_db.parent.chmod(0o755)
        small_db.chmod(0o644)


def _can_mount_read_only() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount --bind / / 2>/dev/null || mount -t tmpfs x /mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount_read_only(), reason="no user namespaces to mount read-only")
def test_a_database_on_a_read_only_mount_can_be_read(small_db: Path) -> None:
    """Read-only media for real: the directory is bind-mounted read-only in a namespace.

    Root too gets EROFS there, so this holds where `chmod` cannot show it. Before: "unable to
    open database file" (SQLite could not create the WAL's shared-memory file).
    """
    with sqlite3.connect(small_db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")  # as this store leaves its databases
    before = _digest(small_db)
    folder = shlex.quote(str(small_db.parent))
    command = (
        f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
        f"{shlex.quote(sys.executable)} -m sessionstore "
        f"--url {shlex.quote(f'sqlite+aiosqlite:///{small_db}')} sessions list --json"
    )
    root = str(Path(__file__).resolve().parents[3])
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", command],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert result.returncode == 0, result.stderr
    assert "small-1" in result.stdout
    assert _digest(small_db) == before
