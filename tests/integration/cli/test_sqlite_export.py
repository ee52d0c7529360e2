"""`export` reads a SQLite file without SQLAlchemy and writes what the store path writes.

On a plain SQLite file URL the command reads the session and its raw history on the
standard library's driver (`_file_history.FileHistory`): the store's functions on the
store's statements compiled for SQLite, a page at a time as the store's `iter_history`
pages (`_history_pages`). These tests hold the pages, the output and the errors equal to
the store's on the same file.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore, SessionStoreError, UserMessage
from sessionstore._file_history import FileHistory, open_file_history
from sessionstore.cli._options import read_only_file_uri
from tests.integration.cli.runner import at_revision, both_paths, cli, ok, store_url


def _both(run: Callable[..., Any], path: Path, *args: str) -> tuple[Any, Any]:
    return both_paths(run, path, "export", *args)


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The demo's session (12 loops), a branch off its third loop, and an id two tenants share."""
    path = tmp_path_factory.mktemp("export") / "demo.db"
    url = f"sqlite+aiosqlite:///{path}"
    session_id = json.loads(ok(url, "demo", "--json").output)["session_id"]

    async def populate() -> None:
        async with SessionStore.from_url(url) as store:
            loops = await store.list_loops(session_id)
            await store.start_loop(
                session_id,
                parent_loop_id=loops[2].id,
                messages=[UserMessage(content="try the other fix")],
            )
            for user in ("ada", "bob"):
                await store.create_session(session_id="twin", app_name="a", user_id=user)
            await store.create_session(session_id="empty", app_name="a", user_id="ada")

    asyncio.run(populate())
    return path, {"demo": session_id}


async def _store_pages(path: Path, session_id: str, loop_id: int | None, size: int) -> Any:
    async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
        return [
            [(s.id, s.loop_id, s.position, s.content_hash, s.message) for s in chunk]
            async for chunk in store.iter_history(session_id, loop_id=loop_id, chunk_size=size)
        ]


async def _file_pages(history: FileHistory, session_id: str, loop_id: int | None, size: int) -> Any:
    return [
        [(s.id, s.loop_id, s.position, s.content_hash, s.message) for s in chunk]
        async for chunk in history.iter_history(session_id, loop_id=loop_id, chunk_size=size)
    ]


def _outcome(read: Any) -> tuple[str, Any]:
    try:
        return "ok", read()
    except (SessionStoreError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("size", [1, 7, 100, 1000])
@pytest.mark.parametrize("which", ["active", "third", "branch", "first", "missing loop"])
def test_the_pages_are_the_stores(demo_file, which, size):
    path, ids = demo_file
    session_id = ids["demo"]
    loops = asyncio.run(_list_loops(path, session_id))
    loop_id = {
        "active": None,
        "third": loops[2].id,
        "branch": loops[-1].id,
        "first": loops[0].id,
        "missing loop": 10_000,
    }[which]
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        found = _outcome(lambda: asyncio.run(_file_pages(history, session_id, loop_id, size)))
    expected = _outcome(lambda: asyncio.run(_store_pages(path, session_id, loop_id, size)))

    assert found == expected
    if which == "missing loop":
        assert found[0] == "LoopNotFoundError"
    else:
        assert found[0] == "ok"
        assert all(0 < len(chunk) <= size for chunk in found[1])
        assert sum(len(chunk) for chunk in found[1]) > 0


async def _list_loops(path: Path, session_id: str) -> Any:
    async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
        return await store.list_loops(session_id)


@pytest.mark.parametrize("session_id", ["twin", "empty", "nope", ""])
def test_the_errors_and_an_empty_history_are_the_stores(demo_file, session_id):
    path, _ = demo_file
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        found = _outcome(lambda: asyncio.run(_file_pages(history, session_id, None, 10)))
        session = _outcome(lambda: asyncio.run(history.get_session(session_id)))
    assert found == _outcome(lambda: asyncio.run(_store_pages(path, session_id, None, 10)))
    assert session[0] == found[0]
    if session_id == "empty":
        assert found == ("ok", [])


def test_a_chunk_size_below_one_is_the_stores_error(demo_file):
    path, ids = demo_file
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None
    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        found = _outcome(lambda: asyncio.run(_file_pages(history, ids["demo"], None, 0)))
    assert found == _outcome(lambda: asyncio.run(_store_pages(path, ids["demo"], None, 0)))
    assert found[0] == "ValueError"


@pytest.mark.parametrize(
    "args",
    [(), ("--compact",), ("--redact-secrets",), ("--loop", "3"), ("--loop", "13")],
    ids=" ".join,
)
def test_the_export_is_the_stores(demo_file, args):
    path, ids = demo_file

    fast, through_store = _both(ok, path, ids["demo"], *args)

    assert fast.stdout == through_store.stdout
    assert json.loads(fast.stdout)["messages"]


@pytest.mark.parametrize(
    "args", [("nope",), ("twin",), ("{demo}", "--loop", "99"), ("",)], ids=" ".join
)
def test_an_error_is_the_stores(demo_file, args):
    path, ids = demo_file
    args = tuple(arg.format(**ids) for arg in args)

    fast, through_store = _both(cli, path, *args)

    assert fast.exit_code == through_store.exit_code != 0
    assert fast.output == through_store.output


def test_an_export_to_a_file_is_the_stores(demo_file, tmp_path):
    path, ids = demo_file
    fast_out, store_out = tmp_path / "fast.json", tmp_path / "store.json"

    ok(f"sqlite+aiosqlite:///{path}", "export", ids["demo"], "-o", str(fast_out))
    ok(store_url(path), "export", ids["demo"], "-o", str(store_out))

    assert fast_out.read_bytes() == store_out.read_bytes()


def test_a_file_at_another_revision_is_left_to_the_store(demo_file, tmp_path):
    source, ids = demo_file
    path = at_revision(source, tmp_path)
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    with open_file_history(uri, timeout=5) as history:
        assert history is None
    fast, through_store = _both(cli, path, ids["demo"])
    assert fast.exit_code == through_store.exit_code == 1
    assert "revision ffffffffffff" in fast.output
    assert fast.output == through_store.output


def test_a_driver_error_is_the_stores(demo_file, tmp_path):
    """A `sqlite3` error while reading is translated as the store translates it."""
    source, ids = demo_file
    path = tmp_path / "no-messages.db"
    shutil.copyfile(source, path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE sessionstore_messages")
    db.close()
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        found = _outcome(lambda: asyncio.run(_file_pages(history, ids["demo"], None, 10)))
    expected = _outcome(lambda: asyncio.run(_store_pages(path, ids["demo"], None, 10)))

    assert found == expected
    assert found[0] == "SchemaError"
    assert "no sessionstore tables" in found[1]
