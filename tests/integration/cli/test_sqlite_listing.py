"""`sessions list` reads a SQLite file without SQLAlchemy, and prints what the store's page prints.

The first page of a plain SQLite file URL is read by `_sqlite_read.first_page` on the
standard library's driver. These tests hold its statement equal to the store's, its
pages and its printed output equal to the store's on the same file (synthetic sessions
and sessions imported from real transcripts), and check that any file it cannot answer
for as the store would (another schema revision, a cursor, another URL form) is read by
the store, which prints what it always did.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.dialects import sqlite

from sessionstore import AssistantMessage, Page, SessionStore, UserMessage
from sessionstore._sqlite_read import (
    LISTING_FILTERS,
    VERSION_TABLE,
    first_page,
    listing_sql,
    shipped_head,
)
from sessionstore.cli._options import _sqlite_file, read_only_file_uri
from sessionstore.store._sessions import listing_statement
from tests.datasets import first_conversations
from tests.integration.cli.runner import cli, ok, store_url

_FILTER_VALUES = {"app_name": "bench", "user_id": "ada"}


@pytest.mark.parametrize("filters", LISTING_FILTERS, ids=lambda f: "+".join(f) or "none")
def test_the_listing_text_is_the_stores_statement_compiled_for_sqlite(filters):
    values = {name: _FILTER_VALUES[name] if name in filters else None for name in _FILTER_VALUES}
    statement = listing_statement(None, limit=50, cursor=None, **values)

    compiled = statement.compile(dialect=sqlite.dialect())

    assert listing_sql(filters) == str(compiled)
    # Its parameters, in order: each filter's value, the rows (limit + 1), the offset.
    bound = [compiled.params[name] for name in compiled.positiontup or ()]
    assert bound == [*(_FILTER_VALUES[name] for name in filters), 51, 0]


def _populate(url: str) -> None:
    """Sessions of two tenants, with titles, metadata and equal creation times (ties)."""

    async def populate() -> None:
        async with SessionStore.from_url(url) as store:
            await store.upgrade()
            for index in range(7):
                session = await store.create_session(
                    app_name="bench" if index % 3 else "other",
                    user_id="ada" if index % 2 else "bob",
                    title=None if index == 4 else f"Session {index} ✓",
                    metadata={"index": index, "tags": ["a", "b"], "nested": {"x": None}},
                )
                await store.start_loop(session.id)
                await store.append_messages(
                    session.id, [UserMessage(content="hi"), AssistantMessage(content="hello")]
                )

    asyncio.run(populate())


@pytest.fixture(scope="module")
def listing_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("listing") / "sessions.db"
    _populate(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(scope="module")
def transcripts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sessions imported from the first conversations of each real transcript file."""
    text = first_conversations(3)
    folder = tmp_path_factory.mktemp("transcripts")
    conversations = folder / "conversations.jsonl"
    conversations.write_text(text, encoding="utf-8")
    url = f"sqlite+aiosqlite:///{folder / 'sessions.db'}"
    ok(url, "import", str(conversations), "--upgrade")
    return folder / "sessions.db"


_LISTINGS = [
    (),
    ("--json",),
    ("--limit", "2"),
    ("--limit", "2", "--json"),
    ("--limit", "1000"),
    ("--app-name", "bench"),
    ("--app-name", "bench", "--user-id", "ada", "--json"),
    ("--app-name", "cli", "--user-id", "local"),
    ("--app-name", "nobody"),
]


@pytest.mark.parametrize("args", _LISTINGS, ids=" ".join)
@pytest.mark.parametrize("database", ["listing_file", "transcripts_file"])
def test_the_file_read_prints_what_the_store_read_prints(database, args, request):
    path: Path = request.getfixturevalue(database)
    assert read_only_file_uri(f"sqlite:///{path}") is not None
    assert read_only_file_uri(store_url(path)) is None

    fast = ok(f"sqlite+aiosqlite:///{path}", "sessions", "list", *args).output
    through_store = ok(store_url(path), "sessions", "list", *args).output

    assert fast == through_store
    assert fast.strip()


@pytest.mark.parametrize("filters", [{}, {"app_name": "bench"}, {"app_name": "cli"}])
@pytest.mark.parametrize("database", ["listing_file", "transcripts_file"])
def test_the_file_read_is_the_stores_page(database, filters, request):
    path: Path = request.getfixturevalue(database)
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    async def through_store(limit: int) -> Page:
        async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
            return await store.list_sessions(limit=limit, **filters)

    for limit in (1, 2, 3, 50):
        page = first_page(uri, timeout=5, limit=limit, **filters)

        assert page is not None
        assert page == asyncio.run(through_store(limit))


def test_the_command_reads_the_file_without_sqlalchemy(listing_file):
    probe = (
        "import json, sys\n"
        "from sessionstore.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:], prog_name='sessionstore')\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    url = f"sqlite+aiosqlite:///{listing_file}"

    def modules_of(*args: str) -> set[str]:
        done = subprocess.run(
            [sys.executable, "-c", probe, "--url", url, "sessions", "list", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "Session" in done.stdout or "next_cursor" in done.stdout
        return set(json.loads(done.stderr.splitlines()[-1]))

    assert [m for m in modules_of() if m.startswith("sqlalchemy")] == []
    assert [m for m in modules_of("--json") if m.startswith("sqlalchemy")] == []
    # A next page is the store's: the probe sees SQLAlchemy then.
    cursor = json.loads(ok(url, "sessions", "list", "--limit", "2", "--json").output)
    assert "sqlalchemy" in modules_of("--limit", "2", "--cursor", cursor["next_cursor"])


def test_a_next_page_is_read_by_the_store_as_before(listing_file):
    url = f"sqlite+aiosqlite:///{listing_file}"
    first = json.loads(ok(url, "sessions", "list", "--limit", "3", "--json").output)

    second = json.loads(
        ok(
            url, "sessions", "list", "--limit", "3", "--cursor", first["next_cursor"], "--json"
        ).output
    )

    ids = [s["id"] for s in first["items"] + second["items"]]
    everything = json.loads(ok(url, "sessions", "list", "--json").output)
    assert ids == [s["id"] for s in everything["items"]][:6]


def _at_revision(source: Path, folder: Path, revision: str) -> Path:
    path = folder / f"at-{revision}.db"
    shutil.copyfile(source, path)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE {VERSION_TABLE} SET version_num = ?", (revision,))
    return path


def _older_revision() -> str:
    from alembic.script import ScriptDirectory

    from sessionstore.store._schema import _config

    head = shipped_head()
    assert head is not None
    script = ScriptDirectory.from_config(_config()).get_revision(head)
    assert script is not None
    assert isinstance(script.down_revision, str)
    return script.down_revision


@pytest.mark.parametrize("which", ["older", "newer"])
def test_a_file_at_another_revision_is_left_to_the_store(listing_file, tmp_path, which):
    revision = _older_revision() if which == "older" else "ffffffffffff"
    path = _at_revision(listing_file, tmp_path, revision)
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    assert first_page(uri, timeout=5, limit=50) is None
    result = cli(f"sqlite+aiosqlite:///{path}", "sessions", "list")
    assert result.exit_code == 1
    assert f"revision {revision}" in result.output
    assert result.output == cli(store_url(path), "sessions", "list").output


def test_a_file_that_is_no_store_is_left_to_the_store(tmp_path):
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    uri = read_only_file_uri(f"sqlite:///{path}")
    assert uri is not None

    assert first_page(uri, timeout=5, limit=50) is None
    result = cli(f"sqlite:///{path}", "sessions", "list")
    assert result.exit_code == 1
    assert "not initialised" in result.output


def test_a_session_created_after_the_read_is_on_the_next_listing(listing_file, tmp_path):
    path = tmp_path / "live.db"
    shutil.copyfile(listing_file, path)
    url = f"sqlite+aiosqlite:///{path}"
    before = json.loads(ok(url, "sessions", "list", "--json").output)["items"]

    async def create() -> str:
        async with SessionStore.from_url(url) as store:
            return (await store.create_session(app_name="bench", user_id="eve")).id

    created = asyncio.run(create())

    after = json.loads(ok(url, "sessions", "list", "--json").output)["items"]
    assert [s["id"] for s in after] == [created] + [s["id"] for s in before]


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///{path}",
        "sqlite+aiosqlite:///{path}",
        "sqlite+aiosqlite:///{path}?mode=ro",
        "sqlite+aiosqlite:///file:{path}?mode=ro&uri=true",
        "sqlite+aiosqlite://",
        "sqlite+aiosqlite:///:memory:",
        "sqlite+pysqlite:///{path}",
        "postgresql+asyncpg://postgres@localhost/{path}",
        "sqlite+aiosqlite:///{path}%20",
        "sqlite+aiosqlite:///{path}.missing",
    ],
)
def test_a_url_is_read_without_the_store_only_when_it_names_the_same_file(listing_file, url):
    url = url.format(path=listing_file)

    uri = read_only_file_uri(url)

    if uri is not None:
        assert _sqlite_file(url) == listing_file
        assert uri.startswith("file:")
        assert uri.endswith("?mode=ro")


def test_times_are_read_as_the_store_reads_them(tmp_path):
    """Microseconds, and a time on a day boundary, survive both reads alike."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'times.db'}"

    async def populate() -> None:
        async with SessionStore.from_url(url) as store:
            await store.upgrade()
            for index in range(3):
                await store.create_session(app_name="a", user_id="b", title=str(index))

    asyncio.run(populate())
    moments = [datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)]
    moments.append(moments[0] - timedelta(microseconds=1))
    with sqlite3.connect(tmp_path / "times.db") as db:
        ids = [row[0] for row in db.execute("SELECT id FROM sessionstore_sessions ORDER BY title")]
        for session_id, moment in zip(ids, moments, strict=True):
            db.execute(
                "UPDATE sessionstore_sessions SET created_at = ? WHERE id = ?",
                (
                    moment.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds"),
                    session_id,
                ),
            )

    fast = ok(url, "sessions", "list", "--json").output
    assert fast == ok(store_url(tmp_path / "times.db"), "sessions", "list", "--json").output
    assert json.loads(fast)["items"][-1]["created_at"] == "2025-12-31T23:59:59.999999Z"


_BUILT_PROBE = """
import json, sys
from sessionstore.cli import main
try:
    main(sys.argv[1:], prog_name="sessionstore")
except SystemExit as exc:
    assert not exc.code, exc.code
from sessionstore import models
built = sorted(
    name for name in dir(models)
    if getattr(getattr(models, name), "__pydantic_complete__", False)
)
print(json.dumps(built), file=sys.stderr)
"""


@pytest.mark.parametrize(
    ("args", "is_reading_messages"),
    [(("sessions", "list"), False), (("context", "{session}", "--budget", "1000"), True)],
    ids=["sessions list", "context"],
)
def test_a_command_builds_only_the_models_it_validates(listing_file, args, is_reading_messages):
    """The models are built on first use (`defer_build`): a listing builds no message class."""
    url = f"sqlite+aiosqlite:///{listing_file}"
    session = json.loads(ok(url, "sessions", "list", "--json").output)["items"][0]["id"]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _BUILT_PROBE,
            "--url",
            url,
            *(a.format(session=session) for a in args),
        ],
        capture_output=True,
        text=True,
        check=True,
    )

    built = set(json.loads(done.stderr.splitlines()[-1]))

    assert ("UserMessage" in built) is is_reading_messages
    assert ("AssistantMessage" in built) is is_reading_messages
    if not is_reading_messages:
        assert built == {"Page", "Session"}
