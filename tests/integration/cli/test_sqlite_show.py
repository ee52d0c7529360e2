"""`sessions show` reads a SQLite file without SQLAlchemy and prints what the store path prints.

On a plain SQLite file URL the command reads the session, its loops and its usage on the
standard library's driver (`_sqlite_context.read_file_session`): the functions the store
runs (`_context_source`, `_usage_read`) on the store's statements compiled for SQLite.
These tests hold what it reads, prints and raises equal to the store's on the same file:
a session with branches, usage carried by its messages and recorded apart (counts whose
sums pass 64 bits), an empty session, a session id two tenants share, and errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    AssistantMessage,
    SessionStore,
    SessionStoreError,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessionstore._sqlite_context import read_file_session
from sessionstore.cli._options import read_only_file_uri
from sessionstore.models._limits import MAX_BIG_INT
from tests.integration.cli.runner import at_revision, both_paths, cli, ok

_BIG = Usage(
    input_tokens=MAX_BIG_INT,
    output_tokens=MAX_BIG_INT - 1,
    cache_read_tokens=2**40,
    cache_write_tokens=7,
    reasoning_tokens=MAX_BIG_INT,
)
"""A call's largest counts: two of them sum past 64 bits, which the split sums hold."""


def _both(run: Callable[..., Any], path: Path, *args: str) -> tuple[Any, Any]:
    return both_paths(run, path, "sessions", "show", *args)


async def _populate(url: str) -> dict[str, str]:
    """The sessions the tests show, by role: `rich`, `empty`, and the shared id `twin`."""
    async with SessionStore.from_url(url) as store:
        await store.upgrade()
        rich = (await store.create_session(app_name="app", user_id="ada", title="Usage")).id
        small = Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100, reasoning_tokens=4)
        first = await store.append_messages(
            rich,
            [
                UserMessage(content="list the files"),
                AssistantMessage(content=[ToolCall(id="c1", name="ls")], model="m-1", usage=_BIG),
                ToolResultMessage(tool_call_id="c1", content="a.py"),
                AssistantMessage(content="a.py", model="m-1", usage=_BIG),
            ],
        )
        await store.append_messages(
            rich,
            [UserMessage(content="and the tests?"), AssistantMessage(content="none", usage=small)],
            loop_id="new",
        )
        await store.record_usage(rich, small, loop_id=first[0].loop_id, turn_index=0)
        await store.record_usage(rich, _BIG, model="m-2")
        # A branch from the first loop: its usage counts too (a call made was paid for).
        await store.start_loop(
            rich,
            parent_loop_id=first[0].loop_id,
            messages=[UserMessage(content="retry"), AssistantMessage(content="ok", usage=small)],
        )
        empty = (await store.create_session(app_name="app", user_id="bob")).id
        for user in ("ada", "bob"):
            await store.create_session(session_id="twin", app_name="app", user_id=user)
    return {"rich": rich, "empty": empty}


@pytest.fixture(scope="module")
def usage_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("show") / "usage.db"
    return path, asyncio.run(_populate(f"sqlite+aiosqlite:///{path}"))


def _outcome(read: Any) -> tuple[str, Any]:
    """What `read()` returned, or its error's class and message."""
    try:
        return "ok", read()
    except SessionStoreError as exc:
        return type(exc).__name__, str(exc)


async def _through_store(path: Path, session_id: str) -> Any:
    async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
        session = await store.get_session(session_id)
        return session, await store.list_loops(session_id), await store.usage(session_id)


@pytest.mark.parametrize("role", ["rich", "empty", "twin", "missing"])
def test_the_file_read_reads_what_the_store_reads(usage_file, role):
    path, ids = usage_file
    session_id = ids.get(role, role)
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    found = _outcome(lambda: read_file_session(uri, timeout=5, session_id=session_id))

    assert found == _outcome(lambda: asyncio.run(_through_store(path, session_id)))
    expected = {"rich": "ok", "empty": "ok", "twin": "AmbiguousSessionError"}
    assert found[0] == expected.get(role, "SessionNotFoundError")


def test_the_usage_read_sums_messages_records_and_branches(usage_file):
    path, ids = usage_file
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None
    read = read_file_session(uri, timeout=5, session_id=ids["rich"])
    assert read is not None
    session, loops, usage = read

    small = Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100, reasoning_tokens=4)
    assert len(loops) == 3
    # Four messages carry usage (two in the first loop, one in the second, one in the
    # branch); two calls are recorded apart (on the first loop's first turn, and the last).
    assert usage.calls == 6
    assert usage.usage.input_tokens == 3 * MAX_BIG_INT + 3 * 120  # past 64 bits, exact
    assert usage.usage == sum([_BIG, _BIG, _BIG, small, small, small], Usage())
    assert {loop.loop_id for loop in usage.loops} == {loop.id for loop in loops}
    assert session.loop_count == 3


@pytest.mark.parametrize("output", [(), ("--json",)])
@pytest.mark.parametrize("role", ["rich", "empty"])
def test_the_output_is_the_stores(usage_file, role, output):
    path, ids = usage_file

    fast, through_store = _both(ok, path, ids[role], *output)

    assert fast.stdout == through_store.stdout
    assert ids[role] in fast.stdout


@pytest.mark.parametrize("session_id", ["twin", "no-such-session", "", "x" * 300])
def test_an_error_is_the_stores(usage_file, session_id):
    path, _ = usage_file

    fast, through_store = _both(cli, path, session_id)

    assert fast.exit_code == through_store.exit_code != 0
    assert fast.output == through_store.output


def test_a_file_at_another_revision_is_left_to_the_store(usage_file, tmp_path):
    source, ids = usage_file
    path = at_revision(source, tmp_path)
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None

    assert read_file_session(uri, timeout=5, session_id=ids["rich"]) is None
    fast, through_store = _both(cli, path, ids["rich"])
    assert fast.exit_code == through_store.exit_code == 1
    assert "revision ffffffffffff" in fast.output
    assert fast.output == through_store.output
