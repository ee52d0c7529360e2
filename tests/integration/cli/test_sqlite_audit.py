"""`audit` reads a SQLite file without SQLAlchemy and prints what the store path prints.

On a plain SQLite file URL the command reads the chain, its blocks, its digest and its
loops' raw messages on the standard library's driver (`_file_history.FileHistory`):
the store's functions on the store's statements compiled for SQLite, with the store's
checks in the store's order. These tests hold each read, the output (text, `--json`,
`--html`) and the errors equal to the store's on the same file.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore, SessionStoreError, UserMessage, compact_session_loops
from sessionstore._file_history import FileHistory, open_file_history
from sessionstore.cli._options import read_only_file_uri
from tests.integration.cli.runner import at_revision, both_paths, cli, ok, store_url

Read = Callable[[Any], Coroutine[Any, Any, Any]]
"""One read, asked of a store or of the file's reader."""


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The demo's compacted session, a second overlay, a branch, an id two tenants share."""
    path = tmp_path_factory.mktemp("audit") / "demo.db"
    url = f"sqlite+aiosqlite:///{path}"
    session_id = json.loads(ok(url, "demo", "--json").output)["session_id"]
    ok(url, "compact", session_id, "--overlay", "tight", "--scope", "1", "--keep-recent", "2")

    async def populate() -> dict[str, Any]:
        async with SessionStore.from_url(url) as store:
            loops = await store.list_loops(session_id)
            compacted = await store.block_history(session_id, loops[-1].id)
            await store.start_loop(
                session_id,
                parent_loop_id=loops[2].id,
                messages=[UserMessage(content="try the other fix")],
            )
            for user in ("ada", "bob"):
                await store.create_session(session_id="twin", app_name="a", user_id=user)
            await store.create_session(session_id="empty", app_name="a", user_id="ada")
            return {
                "demo": session_id,
                "loops": [loop.id for loop in loops],
                "first_block_at": min(b.created_at for b in compacted if b.created_at),
            }

    return path, asyncio.run(populate())


def _outcome(read: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", read()
    except (SessionStoreError, ValueError) as exc:
        return type(exc).__name__, str(exc)


def _both_reads(path: Path, read: Read) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """`read` on the file's reader, then on the store, on the same file."""
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None
    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        file_reader: FileHistory = history
        found = _outcome(lambda: asyncio.run(read(file_reader)))

    async def through_store() -> Any:
        async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
            return await read(store)

    return found, _outcome(lambda: asyncio.run(through_store()))


def _loop(ids: dict[str, Any], which: str) -> int | None:
    loops: dict[str, int | None] = {
        "active": None,
        "third": ids["loops"][2],
        "last": ids["loops"][-1],
        "missing": 10_000,
    }
    return loops[which]


@pytest.mark.parametrize("limit", [None, 1, 3])
@pytest.mark.parametrize("as_of", ["now", "first compaction", "before"])
@pytest.mark.parametrize("overlay", ["default", "tight", "missing"])
@pytest.mark.parametrize("which", ["active", "third", "last", "missing"])
def test_the_chain_and_its_blocks_are_the_stores(demo_file, which, overlay, as_of, limit):
    path, ids = demo_file
    moment = {
        "now": None,
        "first compaction": ids["first_block_at"],
        "before": ids["first_block_at"] - timedelta(days=1),
    }[as_of]

    async def read(reader: Any) -> Any:
        return await reader.chain_blocks(
            ids["demo"], loop_id=_loop(ids, which), overlay=overlay, as_of=moment, limit=limit
        )

    found, expected = _both_reads(path, read)

    assert found == expected
    if which == "missing":
        assert found[0] == "LoopNotFoundError"
    elif overlay == "missing":
        assert found[0] == "OverlayNotFoundError"
    elif as_of == "before":
        assert found == ("ok", [])  # no loop of the chain existed yet
    else:
        assert found[0] == "ok"
        assert found[1]  # a chain of one loop at least
        if (which, as_of) == ("last", "now"):  # the demo's loop, compacted in both overlays
            assert found[1][-1][1] is not None


@pytest.mark.parametrize("as_of", ["now", "first compaction"])
@pytest.mark.parametrize("overlay", ["default", "tight"])
@pytest.mark.parametrize("which", ["active", "third", "last", "missing"])
def test_the_digest_is_the_stores(demo_file, which, overlay, as_of):
    path, ids = demo_file
    moment = None if as_of == "now" else ids["first_block_at"]

    async def read(reader: Any) -> Any:
        return await reader.get_digest(
            ids["demo"], loop_id=_loop(ids, which), overlay=overlay, as_of=moment
        )

    found, expected = _both_reads(path, read)

    assert found == expected
    if (which, overlay, as_of) == ("last", "default", "now"):
        assert found[1] is not None  # the demo's digest


@pytest.mark.parametrize("which", ["active", "third", "last", "missing"])
def test_a_loops_messages_and_blocks_are_the_stores(demo_file, which):
    path, ids = demo_file
    loop_id = _loop(ids, which)

    async def messages(reader: Any) -> Any:
        return await reader.get_messages(ids["demo"], loop_id)

    async def blocks(reader: Any) -> Any:
        return await reader.block_history(
            ids["demo"], ids["loops"][-1] if loop_id is None else loop_id
        )

    found, expected = _both_reads(path, messages)
    assert found == expected
    found_blocks, expected_blocks = _both_reads(path, blocks)
    assert found_blocks == expected_blocks
    if which == "missing":
        assert found[0] == found_blocks[0] == "LoopNotFoundError"
    else:
        assert found[1]
    if which == "last":
        assert {block.overlay for block in found_blocks[1]} == {"default", "tight"}


@pytest.mark.parametrize("session_id", ["twin", "empty", "nope", ""])
def test_the_errors_and_an_empty_session_are_the_stores(demo_file, session_id):
    path, _ = demo_file
    reads: list[Read] = [
        lambda reader: reader.chain_blocks(session_id),
        lambda reader: reader.get_digest(session_id),
        lambda reader: reader.get_messages(session_id),
    ]
    for read in reads:
        found, expected = _both_reads(path, read)
        assert found == expected
        assert (found[0] == "ok") == (session_id == "empty")


def test_bad_arguments_are_refused_as_the_store_refuses_them(demo_file):
    path, ids = demo_file
    naive = datetime(2026, 1, 1, tzinfo=UTC).replace(tzinfo=None)  # refused: no zone
    reads: list[Read] = [
        lambda reader: reader.chain_blocks(ids["demo"], limit=0),
        lambda reader: reader.chain_blocks(ids["demo"], as_of=naive),
        lambda reader: reader.chain_blocks(ids["demo"], loop_id=0),
        lambda reader: reader.chain_blocks(ids["demo"], overlay=""),
        lambda reader: reader.get_digest(ids["demo"], as_of=naive),
        lambda reader: reader.get_messages(ids["demo"], -1),
        lambda reader: reader.block_history(ids["demo"], 0),
    ]
    for read in reads:
        found, expected = _both_reads(path, read)
        assert found == expected
        assert found[0] != "ok"


def test_a_driver_error_is_the_stores(demo_file, tmp_path):
    source, ids = demo_file
    path = tmp_path / "no-blocks.db"
    shutil.copyfile(source, path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE sessionstore_block_sections")
    db.close()

    async def read(reader: Any) -> Any:  # the demo's compacted loop: its blocks' sections
        return await reader.chain_blocks(ids["demo"], loop_id=ids["loops"][-1])

    found, expected = _both_reads(path, read)

    assert found == expected
    assert found[0] == "SchemaError"


# ── the command ────────────────────────────────────────────────────────────────

_WRITTEN = re.compile(r"Written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
"""The page's time of writing, the one part of two pages of the same audit that differs."""


def _both(run: Callable[..., Any], path: Path, *args: str) -> tuple[Any, Any]:
    return both_paths(run, path, "audit", *args)


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--json",),
        ("--overlay", "tight"),
        ("--loop", "3"),
        ("--loop", "13", "--json"),
        ("--scope", "2"),
        ("--scope", "budget", "--budget", "5000", "--json"),
        ("--redact-secrets",),
        ("--html", "-"),
        ("--html", "-", "--overlay", "tight", "--loop", "12"),
    ],
    ids=" ".join,
)
def test_the_audit_is_the_stores(demo_file, args):
    path, ids = demo_file

    fast, through_store = _both(ok, path, ids["demo"], *args)

    assert _WRITTEN.sub("", fast.stdout) == _WRITTEN.sub("", through_store.stdout)
    if "--json" in args:
        assert json.loads(fast.stdout)["loops"]
    elif "--html" in args:
        assert fast.stdout.rstrip().endswith("</html>")
    else:
        assert ids["demo"] in fast.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("nope",),
        ("twin",),
        ("{demo}", "--loop", "99"),
        ("{demo}", "--overlay", "missing"),
        ("{demo}", "--overlay", "missing", "--html", "-"),
        ("",),
    ],
    ids=" ".join,
)
def test_an_error_is_the_stores(demo_file, args):
    path, ids = demo_file
    args = tuple(arg.format(**ids) for arg in args)

    fast, through_store = _both(cli, path, *args)

    assert fast.exit_code == through_store.exit_code != 0
    assert fast.output == through_store.output


def test_an_html_audit_to_a_file_is_the_stores(demo_file, tmp_path):
    path, ids = demo_file
    fast_out, store_out = tmp_path / "fast.html", tmp_path / "store.html"

    ok(f"sqlite+aiosqlite:///{path}", "audit", ids["demo"], "--html", str(fast_out))
    ok(store_url(path), "audit", ids["demo"], "--html", str(store_out))

    fast, through_store = fast_out.read_text(), store_out.read_text()
    assert _WRITTEN.search(fast)
    assert _WRITTEN.sub("", fast) == _WRITTEN.sub("", through_store)


def test_a_file_at_another_revision_is_left_to_the_store(demo_file, tmp_path):
    source, ids = demo_file
    path = at_revision(source, tmp_path)

    fast, through_store = _both(cli, path, ids["demo"])

    assert fast.exit_code == through_store.exit_code == 1
    assert "revision ffffffffffff" in fast.output
    assert fast.output == through_store.output


def _copy_of(source: Path, directory: Path) -> tuple[Path, str]:
    """A copy of the demo's file, to write to, and the URI its reader opens."""
    path = directory / "snapshot.db"
    shutil.copyfile(source, path)
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None
    return path, uri


async def _write_meanwhile(path: Path, session_id: str, compact_into: str | None = None) -> None:
    """Append a message through the store (and compact into the overlay `compact_into`)."""
    async with SessionStore.from_url(f"sqlite+aiosqlite:///{path}") as store:
        await store.append_messages(session_id, [UserMessage(content="meanwhile")])
        if compact_into is not None:
            await compact_session_loops(
                store, session_id, max_context_tokens=500, overlay=compact_into
            )


def test_one_read_transaction_sees_one_snapshot(demo_file, tmp_path):
    """The file's reads of an audit share one snapshot: a message appended meanwhile is unseen."""
    source, ids = demo_file
    path, uri = _copy_of(source, tmp_path)

    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        before = asyncio.run(history.get_messages(ids["demo"]))
        asyncio.run(_write_meanwhile(path, ids["demo"]))
        after = asyncio.run(history.get_messages(ids["demo"]))
    assert after == before

    found, _ = _both_reads(path, lambda reader: reader.get_messages(ids["demo"]))
    assert found[1][-1].message == UserMessage(content="meanwhile")
    assert len(found[1]) == len(before) + 1


def test_times_compare_in_utc(demo_file):
    """An `as_of` in another zone is the same moment to both readers."""
    path, ids = demo_file
    moment = ids["first_block_at"].astimezone(UTC).astimezone(datetime.now().astimezone().tzinfo)

    found, expected = _both_reads(
        path, lambda reader: reader.chain_blocks(ids["demo"], as_of=moment, overlay="tight")
    )

    assert found == expected
    assert found[0] == "ok"


def _moments(ids: dict[str, Any]) -> list[datetime | None]:
    first = ids["first_block_at"]
    return [None, first, first - timedelta(microseconds=1), first + timedelta(days=1)]


def test_a_readers_reads_in_sequence_answer_as_fresh_ones(demo_file):
    """One reader keeps the chains and blocks it read; each answer is still a fresh reader's.

    An audit asks the same reader for the chain and its blocks, then the digest, at each
    moment; each answer must be what a reader opened for that one read says.
    """
    path, ids = demo_file
    asked: list[Read] = []
    for moment in _moments(ids):
        for overlay in ("default", "tight"):
            for loop_id in (ids["loops"][-1], None, ids["loops"][2]):
                for limit in (None, 2):
                    asked.append(
                        partial(
                            _chain_blocks,
                            ids["demo"],
                            loop_id=loop_id,
                            overlay=overlay,
                            as_of=moment,
                            limit=limit,
                        )
                    )
                asked.append(
                    partial(_digest, ids["demo"], loop_id=loop_id, overlay=overlay, as_of=moment)
                )
    asked.append(partial(_block_history, ids["demo"], ids["loops"][-1]))

    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None
    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        in_sequence = [asyncio.run(read(history)) for read in asked]
    fresh = [_both_reads(path, read)[0] for read in asked]

    assert [("ok", found) for found in in_sequence] == fresh
    assert any(block is not None for _, block in in_sequence[0])


def test_a_reader_reads_each_block_once_a_snapshot(demo_file):
    """The blocks of an audit's moments are read once: a block's rows never change."""
    path, ids = demo_file
    uri = read_only_file_uri(f"sqlite+aiosqlite:///{path}")
    assert uri is not None
    statements: list[str] = []
    last = ids["loops"][-1]
    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        history._db.set_trace_callback(statements.append)
        for moment in _moments(ids) * 2:
            asyncio.run(history.chain_blocks(ids["demo"], loop_id=last, as_of=moment))
            asyncio.run(history.get_digest(ids["demo"], loop_id=last, as_of=moment))
    sections = [s for s in statements if "FROM sessionstore_section_messages" in s]
    chains = [s for s in statements if "WITH RECURSIVE" in s]

    assert len(sections) == 1  # the first moment's blocks; every later moment shows some of them
    assert len(chains) == len(_moments(ids))  # each moment's chain once, for both reads


def test_a_new_read_transaction_forgets_what_the_last_one_read(demo_file, tmp_path):
    """`iter_history` takes a read transaction a page; what was written meanwhile then shows."""
    source, ids = demo_file
    path, uri = _copy_of(source, tmp_path)

    async def drain(history: FileHistory) -> None:
        async for _ in history.iter_history(ids["demo"], chunk_size=10):
            pass

    def read(reader: Any) -> Any:
        return reader.chain_blocks(ids["demo"], overlay="new")

    with open_file_history(uri, timeout=5) as history:
        assert history is not None
        before = asyncio.run(history.chain_blocks(ids["demo"]))
        asyncio.run(_write_meanwhile(path, ids["demo"], compact_into="new"))
        unchanged = asyncio.run(history.chain_blocks(ids["demo"]))
        asyncio.run(drain(history))
        after = asyncio.run(read(history))

    assert unchanged == before
    assert ("ok", after) == _both_reads(path, read)[0]
    assert after[-1][0].message_count == before[-1][0].message_count + 1
    assert any(block is not None for _, block in after)


async def _chain_blocks(session_id: str, reader: Any, **options: Any) -> Any:
    return await reader.chain_blocks(session_id, **options)


async def _digest(session_id: str, reader: Any, **options: Any) -> Any:
    return await reader.get_digest(session_id, **options)


async def _block_history(session_id: str, loop_id: int, reader: Any) -> Any:
    return await reader.block_history(session_id, loop_id)
