"""`context` reads a SQLite file without SQLAlchemy, and prints what it prints through the store.

On a plain SQLite file URL the command reads on the standard library's driver
(`_sqlite_context`): the same read (`_context_read.read_context`) on the store's
statements compiled for SQLite, kept as text. These tests hold each text equal to the
store's compilation, and the command's output and errors equal to the store's on the
same file (the demo's compacted session with a second overlay, and a compacted real
transcript), over the options that change what is read or shown.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from sessionstore import FixedCount, SessionStore, SessionStoreError, TokenBudget
from sessionstore._context_source import STATEMENTS as NAMES
from sessionstore._items import ContextSources
from sessionstore._sqlite_context import STATEMENTS, SqliteSource, read_file_context, sqlite_time
from sessionstore._sqlite_read import shipped_head
from sessionstore.cli._options import read_only_file_uri
from sessionstore.models import LoopRecord
from sessionstore.store._sessions import bound_time
from sessionstore.store._source import StoreSource, sqlite_compiled
from tests.datasets import first_conversations
from tests.integration.cli.runner import at_revision, both_paths, cli, ok, store_url


def test_every_statement_is_the_stores_compiled_for_sqlite():
    # Out of date after a change to a statement: `python tools/sqlite_statements.py`.
    assert set(STATEMENTS) == set(NAMES)
    for name in NAMES:
        assert STATEMENTS[name] == sqlite_compiled(name), f"{name}: run tools/sqlite_statements.py"


def test_a_time_is_bound_as_the_store_binds_it():
    moments = [
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 1, tzinfo=UTC) - timedelta(microseconds=1),
        datetime(2026, 5, 9, 23, 30, 1, 123456, tzinfo=UTC).astimezone(
            datetime.now(UTC).astimezone().tzinfo
        ),
    ]
    engine = create_engine("sqlite://")
    with engine.connect() as db:
        for moment in moments:
            assert sqlite_time(moment) == bound_time(db, moment)
    engine.dispose()


def _both(run: Callable[..., Any], path: Path, *args: str) -> tuple[Any, Any]:
    return both_paths(run, path, "context", *args)


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The demo's session (12 loops, compacted, a digest), compacted again into `brief`."""
    path = tmp_path_factory.mktemp("context") / "demo.db"
    url = f"sqlite+aiosqlite:///{path}"
    session_id = json.loads(ok(url, "demo", "--json").output)["session_id"]
    ok(url, "compact", session_id, "--budget", "6000", "--overlay", "brief", "--scope", "2")
    return path, session_id


@pytest.fixture(scope="module")
def transcript_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The longest of the first real transcripts of each file, imported and compacted."""
    text = first_conversations(2)
    folder = tmp_path_factory.mktemp("transcripts")
    conversations = folder / "conversations.jsonl"
    conversations.write_text(text, encoding="utf-8")
    path = folder / "sessions.db"
    url = f"sqlite+aiosqlite:///{path}"
    ok(url, "import", str(conversations), "--upgrade")

    async def longest() -> str:
        async with SessionStore.from_url(url) as store:
            page = await store.list_sessions(limit=100)
            sizes = [(len(await store.get_messages(s.id)), s.id) for s in page.items]
            return max(sizes)[1]

    session_id = asyncio.run(longest())
    ok(url, "compact", session_id, "--budget", "4000")
    return path, session_id


_VARIANTS = [
    ("--budget", "32000"),
    ("--budget", "2000"),
    ("--budget", "32000", "--as-of", "1"),
    ("--budget", "32000", "--system-prompt-tokens", "500"),
    ("--budget", "8000", "--loop", "3"),
    ("--budget", "8000", "--loop", "1"),
    ("--budget", "32000", "--redact-secrets"),
    ("--budget", "32000", "--scope", "1"),
    ("--budget", "32000", "--scope", "budget"),
    ("--budget", "32000", "--overlay", "brief"),
    ("--budget", "32000", "--overlay", "brief", "--as-of", "1"),
]


@pytest.mark.parametrize("output", [(), ("--format", "openai"), ("--format", "json"), ("--json",)])
@pytest.mark.parametrize("args", _VARIANTS, ids=" ".join)
def test_the_demo_context_is_the_stores(demo_file, args, output):
    path, session_id = demo_file
    assert read_only_file_uri(f"sqlite+aiosqlite:///{path}") is not None
    assert read_only_file_uri(store_url(path)) is None

    fast, through_store = _both(ok, path, session_id, *args, *output)

    assert fast.stdout == through_store.stdout
    assert fast.output == through_store.output
    assert fast.stdout.strip()


_TRANSCRIPT_VARIANTS = [
    ("--budget", "32000"),
    ("--budget", "1500"),
    ("--budget", "32000", "--as-of", "1"),
    ("--budget", "4000", "--system-prompt-tokens", "300", "--redact-secrets"),
]


@pytest.mark.parametrize("output", [(), ("--format", "openai"), ("--json",)])
@pytest.mark.parametrize("args", _TRANSCRIPT_VARIANTS, ids=" ".join)
def test_a_real_transcripts_context_is_the_stores(transcript_file, args, output):
    path, session_id = transcript_file

    fast, through_store = _both(ok, path, session_id, *args, *output)

    assert fast.output == through_store.output
    assert fast.stdout.strip()


@pytest.mark.parametrize(
    "args",
    [
        ("no-such-session", "--budget", "1000"),
        ("{session}", "--budget", "1000", "--loop", "99"),
        ("{session}", "--budget", "1000", "--overlay", "nope"),
        ("{session}", "--budget", "1000", "--as-of", "99"),
        ("{session}", "--budget", "1000", "--system-prompt-tokens", "1000"),
        ("{session}", "--budget", "1000", "--overlay", "x" * 300),
    ],
    ids=lambda args: " ".join(args)[:40],
)
def test_an_error_is_the_stores(demo_file, args):
    path, session_id = demo_file
    args = tuple(arg.format(session=session_id) for arg in args)

    fast, through_store = _both(cli, path, *args)

    assert fast.exit_code == through_store.exit_code != 0
    assert fast.output == through_store.output


def test_an_ambiguous_session_is_the_stores_error(tmp_path):
    path = tmp_path / "twins.db"
    url = f"sqlite+aiosqlite:///{path}"

    async def populate() -> None:
        async with SessionStore.from_url(url) as store:
            await store.upgrade()
            for user in ("ada", "bob"):
                await store.create_session(session_id="twin", app_name="a", user_id=user)

    asyncio.run(populate())

    fast, through_store = _both(cli, path, "twin", "--budget", "1000")

    assert fast.exit_code == through_store.exit_code == 1
    assert fast.output == through_store.output
    assert "twin" in fast.output


def test_an_empty_session_is_the_stores(tmp_path):
    path = tmp_path / "empty.db"
    url = f"sqlite+aiosqlite:///{path}"

    async def populate() -> str:
        async with SessionStore.from_url(url) as store:
            await store.upgrade()
            return (await store.create_session(app_name="a", user_id="b")).id

    session_id = asyncio.run(populate())

    fast, through_store = _both(cli, path, session_id, "--budget", "1000", "--json")

    assert fast.exit_code == through_store.exit_code
    assert fast.output == through_store.output


def test_a_file_at_another_revision_is_left_to_the_store(demo_file, tmp_path):
    source, session_id = demo_file
    path = at_revision(source, tmp_path)

    fast, through_store = _both(cli, path, session_id, "--budget", "1000")

    assert fast.exit_code == through_store.exit_code == 1
    assert "revision ffffffffffff" in fast.output
    assert fast.output == through_store.output


def test_an_in_list_is_expanded_and_an_empty_one_reads_nothing(demo_file):
    path, session_id = demo_file
    with sqlite3.connect(path) as db:
        source = SqliteSource(db)
        (tenant,) = source.rows("session_tenants", {"sid": session_id})
        key = {"sid": session_id, "app": tenant[0], "user": tenant[1]}
        loops = [row.id for row in source.rows("loops", key)]
        found = source.rows("block_rows", {**key, "loops": loops, "overlay": "default"})

        assert {row.loop_id for row in found} <= set(loops)
        assert found
        assert source.rows("block_rows", {**key, "loops": [], "overlay": "default"}) == []
    assert shipped_head() is not None


@pytest.mark.parametrize("scope", [None, FixedCount(count=1), TokenBudget()], ids=repr)
@pytest.mark.parametrize("as_of", [None, 1])
@pytest.mark.parametrize("overlay", ["default", "brief"])
@pytest.mark.parametrize("budget", [32000, 2000])
@pytest.mark.parametrize("loop_number", [None, 3])
def test_the_file_read_reads_what_the_store_reads(
    demo_file, scope, as_of, overlay, budget, loop_number
):
    """The read itself, not only the printed context: the same loops, blocks and messages."""
    path, session_id = demo_file
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    def loop_id_of(loops: list[LoopRecord]) -> int | None:
        return None if loop_number is None else loops[loop_number - 1].id

    def through_file() -> tuple[list[LoopRecord], ContextSources] | None:
        return read_file_context(
            uri,
            timeout=5,
            session_id=session_id,
            loop_id_of=loop_id_of,
            scope=scope,
            budget=lambda: budget,
            overlay=overlay,
            as_of=as_of,
        )

    async def read() -> tuple[list[LoopRecord], ContextSources]:
        async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
            loops = await store.list_loops(session_id)
            sources = await store.read_context(
                session_id,
                budget=budget,
                scope=scope,
                loop_id=loop_id_of(loops),
                overlay=overlay,
                as_of=as_of,
            )
            return loops, sources

    def through_store() -> tuple[list[LoopRecord], ContextSources]:
        return asyncio.run(read())

    found = _outcome(through_file)
    assert found == _outcome(through_store)
    # Loop 3 has no block: a generation of it is an error (the same on both).
    assert found[0] == ("BlockNotFoundError" if loop_number and as_of else "ok")
    assert found[0] != "ok" or found[1][1].loops


def _outcome(read: Callable[[], Any]) -> tuple[str, Any]:
    """What `read` returned, or its error's class and message."""
    try:
        return "ok", read()
    except SessionStoreError as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("name", NAMES)
def test_every_statement_reads_what_the_stores_reads(demo_file, name):
    """Each statement run on both sources, on the demo's file: the same columns and values."""
    path, session_id = demo_file
    engine = create_engine(f"sqlite:///{path}")
    with sqlite3.connect(path) as raw, engine.connect() as db:
        file_source, store_source = SqliteSource(raw), StoreSource(db)
        (tenant,) = file_source.rows("session_tenants", {"sid": session_id})
        key = {"sid": session_id, "app": tenant[0], "user": tenant[1]}
        loops = [row.id for row in file_source.rows("loops", key)]
        blocks = [
            row.id
            for row in file_source.rows("block_rows", {**key, "loops": loops, "overlay": "default"})
        ]
        sections = [row.id for row in file_source.rows("sections", {**key, "blocks": blocks})]
        params = {
            **key,
            "head": loops[-1],
            "limit": 3,
            "lid": loops[-1],
            "loops": loops,
            "heads": loops,
            "blocks": blocks,
            "sections": sections,
            "overlay": "default",
            "generation": 1,
            "t": datetime.now(UTC),
            "a": 0,
            "b": 1_000,
            "start": 0,
            "stop": 1_000,
        }

        read = file_source.rows(name, params)
        expected = store_source.rows(name, params)

    engine.dispose()
    assert [row._fields for row in read[:1]] == [tuple(row._fields) for row in expected[:1]]
    hexed = [
        tuple(value.hex() if isinstance(value, bytes) else value for value in row) for row in read
    ]
    assert hexed == [tuple(row) for row in expected]
    # The demo records no usage row (its messages carry theirs): test_sqlite_show reads some.
    assert expected or name in ("generation_time", "loop_stats_as_of", "usage_recorded")
