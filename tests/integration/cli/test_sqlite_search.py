"""`search` reads a SQLite file without SQLAlchemy when its index is current, as the store would.

On a plain SQLite file URL whose raw messages' index holds every message, the command
runs the store's search statements (`_search_core`) on the standard library's driver
(`_sqlite_search.search_file`). With messages not indexed yet it searches through the
store, which indexes them first. These tests hold the hits, the output and the errors
equal to the store's on the same file, and check which path answered.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore, SessionStoreError, UserMessage
from sessionstore._search_core import search_terms
from sessionstore._sqlite_search import search_file
from sessionstore.cli._options import read_only_file_uri
from tests.integration.cli.runner import at_revision, both_paths, cli, ok, store_url
from tests.integration.cli.test_fast_start import _modules_of_a_run


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The demo's compacted session, an id two tenants share, its index brought up to date."""
    path = tmp_path_factory.mktemp("search") / "demo.db"
    url = f"sqlite+aiosqlite:///{path}"
    session_id = json.loads(ok(url, "demo", "--json").output)["session_id"]

    async def populate() -> None:
        async with SessionStore.from_url(url) as store:
            for user in ("ada", "bob"):
                twin = store.for_tenant("a", user)
                await twin.create_session(session_id="twin")
                await twin.append_messages("twin", [UserMessage(content=f"pytest fails: {user}")])
            await store.search("pytest")  # indexes every message

    asyncio.run(populate())
    return path, {"demo": session_id}


def _file_search(path: Path, query: str, **options: Any) -> Any:
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None
    settings: dict[str, Any] = {"session_id": None, "app_name": None, "user_id": None}
    settings |= {"limit": 20, "include_summaries": False, **options}
    terms = search_terms(query, settings["limit"], settings["app_name"], settings["user_id"])
    return search_file(uri, timeout=5, terms=terms, **settings)


async def _store_search(path: Path, query: str, **options: Any) -> Any:
    async with SessionStore.from_url(store_url(path)) as store:
        return await store.search(query, **options)


def _outcome(read: Any) -> tuple[str, Any]:
    try:
        return "ok", read()
    except (SessionStoreError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize(
    ("query", "options"),
    [
        ("pytest", {}),
        ("pytest", {"limit": 1}),
        ("pytest", {"limit": 1000}),
        ("PyTest fails", {}),
        ("pytest", {"include_summaries": True}),
        ("tests failed", {"include_summaries": True, "limit": 50}),
        ("pytest", {"session_id": "{demo}"}),
        ("pytest", {"app_name": "a"}),
        ("pytest", {"app_name": "a", "user_id": "bob"}),
        ("zzzqqq", {}),
        ('"AND" NEAR( * read_file', {}),
    ],
    ids=repr,
)
def test_the_hits_are_the_stores(demo_file, query, options):
    path, ids = demo_file
    options = {k: v.format(**ids) if isinstance(v, str) else v for k, v in options.items()}

    found = _outcome(lambda: _file_search(path, query, **options))
    expected = _outcome(lambda: asyncio.run(_store_search(path, query, **options)))

    assert found == expected
    if query == "pytest" and "app_name" not in options:
        assert found[1]


@pytest.mark.parametrize(
    ("query", "options"),
    [
        ("pytest", {"session_id": "twin"}),
        ("pytest", {"session_id": "nope"}),
        ("pytest", {"session_id": ""}),
        ("   ", {}),
        ("pytest", {"limit": 0}),
        ("pytest", {"user_id": "bob"}),
    ],
    ids=repr,
)
def test_the_errors_are_the_stores(demo_file, query, options):
    path, _ = demo_file

    found = _outcome(lambda: _file_search(path, query, **options))
    expected = _outcome(lambda: asyncio.run(_store_search(path, query, **options)))

    assert found == expected
    assert found[0] != "ok"


def _both(run: Callable[..., Any], path: Path, *args: str) -> tuple[Any, Any]:
    return both_paths(run, path, "search", *args)


@pytest.mark.parametrize(
    "args",
    [
        ("pytest",),
        ("pytest", "--json"),
        ("pytest", "--limit", "3", "--summaries"),
        ("pytest", "--session", "{demo}", "--json"),
        ("pytest", "--app-name", "a", "--user-id", "ada"),
        ("zzzqqq",),
    ],
    ids=" ".join,
)
def test_the_command_prints_what_the_store_path_prints(demo_file, args):
    path, ids = demo_file
    args = tuple(arg.format(**ids) for arg in args)

    fast, through_store = _both(ok, path, *args)

    assert fast.stdout == through_store.stdout
    if "--json" in args:
        assert json.loads(fast.stdout)


@pytest.mark.parametrize(
    "args", [("pytest", "--session", "nope"), ("pytest", "--session", "twin"), ("  ",)]
)
def test_a_command_error_is_the_stores(demo_file, args):
    path, _ = demo_file

    fast, through_store = _both(cli, path, *args)

    assert fast.exit_code == through_store.exit_code == 1
    assert fast.output == through_store.output


def test_messages_not_indexed_yet_are_searched_through_the_store(demo_file, tmp_path):
    """An append leaves the index behind: the store's search indexes it, then the file answers."""
    source, ids = demo_file
    path = tmp_path / "behind.db"
    shutil.copyfile(source, path)

    async def append() -> None:
        async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
            await store.append_messages(ids["demo"], [UserMessage(content="quokka sighted")])

    asyncio.run(append())
    assert _file_search(path, "quokka") is None  # the file's reader does not write the index

    hits = json.loads(ok(f"sqlite+aiosqlite:///{path}", "search", "quokka", "--json").stdout)

    assert [hit["snippet"] for hit in hits] == ["**quokka** sighted"]
    found = _file_search(path, "quokka")  # indexed by the command's search
    assert found is not None
    assert [hit.message_id for hit in found] == [hit["message_id"] for hit in hits]


def test_a_file_at_another_revision_is_left_to_the_store(demo_file, tmp_path):
    source, _ = demo_file
    path = at_revision(source, tmp_path)

    assert _file_search(path, "pytest") is None
    fast, through_store = _both(cli, path, "pytest")
    assert fast.exit_code == through_store.exit_code == 1
    assert "revision ffffffffffff" in fast.output
    assert fast.output == through_store.output


@pytest.mark.parametrize("indexed", [True, False])
def test_a_search_of_an_indexed_file_does_not_load_sqlalchemy(demo_file, tmp_path, indexed):
    source, ids = demo_file
    path = tmp_path / "probe.db"
    shutil.copyfile(source, path)
    if not indexed:
        asyncio.run(_append_one(path, ids["demo"]))

    out, imported = _modules_of_a_run(f"sqlite+aiosqlite:///{path}", "search", "pytest")

    modules = set(imported)
    assert "pytest" in out.lower()
    assert ("sqlalchemy" in modules) is not indexed  # messages appended: the store indexes them
    assert ("sessionstore.store" in modules) is not indexed


async def _append_one(path: Path, session_id: str) -> None:
    async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
        await store.append_messages(session_id, [UserMessage(content="one more")])
