"""Concurrent writers: positions stay contiguous and unique, stale writes are refused."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from pathlib import Path

import pytest

from sessionstore import SessionStore, StoredMessage, UserMessage, migrate
from sessionstore.errors import StaleWriteError


async def _positions(store: SessionStore, session_id: str) -> list[int]:
    return [m.position for m in await store.get_messages(session_id)]


def _user_texts(stored: Sequence[StoredMessage]) -> list[str]:
    """The text of each message; the writers here append user messages only."""
    texts = []
    for m in stored:
        assert isinstance(m.message, UserMessage)
        texts.append(m.message.text)
    return texts


async def test_concurrent_tasks_keep_positions_contiguous(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="ada")
    await store.start_loop(session.id)

    async def writer(n: int) -> None:
        for i in range(5):
            batch = [UserMessage(content=f"w{n} b{i} m{j}") for j in range(3)]
            await store.append_messages(session.id, batch)

    await asyncio.gather(*(writer(n) for n in range(12)))
    assert await _positions(store, session.id) == list(range(12 * 5 * 3))
    # Each batch landed in one piece: its three messages are adjacent.
    texts = _user_texts(await store.get_messages(session.id))
    for start in range(0, len(texts), 3):
        prefixes = {t.rsplit(" ", 1)[0] for t in texts[start : start + 3]}
        assert len(prefixes) == 1


async def test_concurrent_stores_on_one_database(db_url: str, store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="ada")
    others = [SessionStore.from_url(db_url) for _ in range(3)]
    try:

        async def writer(handle: SessionStore, n: int) -> None:
            for i in range(10):
                await handle.append_messages(session.id, [UserMessage(content=f"{n}-{i}")])

        await asyncio.gather(*(writer(h, n) for n, h in enumerate([store, *others])))
    finally:
        for handle in others:
            await handle.close()
    assert await _positions(store, session.id) == list(range(40))


async def test_only_one_of_two_writers_with_the_same_version_wins(store: SessionStore) -> None:
    session = await store.create_session(app_name="app", user_id="ada")
    version = session.version

    async def write(text: str) -> str:
        try:
            await store.append_messages(
                session.id, [UserMessage(content=text)], expected_version=version
            )
        except StaleWriteError:
            return "stale"
        return "ok"

    outcomes = await asyncio.gather(*(write(f"m{i}") for i in range(6)))
    assert sorted(outcomes) == ["ok"] + ["stale"] * 5
    assert len(await store.get_messages(session.id)) == 1


def _process_writer(url: str, session_id: str, worker: int, batches: int) -> None:
    async def run() -> None:
        async with SessionStore.from_url(url) as handle:
            for i in range(batches):
                batch = [UserMessage(content=f"p{worker} b{i} m{j}") for j in range(4)]
                await handle.append_messages(session_id, batch)

    asyncio.run(run())


@pytest.mark.slow
async def test_several_processes_append_to_one_sqlite_file(tmp_path: Path) -> None:
    """Four processes share one SQLite file; every batch lands whole and in order."""
    # A file of its own, migrated here: the run's shared file is migrated only by the
    # tests before this one in the same worker, and under xdist there may be none.
    sqlite_url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    await migrate.upgrade(sqlite_url)
    async with SessionStore.from_url(sqlite_url) as store:
        session = await store.create_session(app_name="app", user_id="ada")
        await store.start_loop(session.id)
        context = multiprocessing.get_context("spawn")
        processes = [
            context.Process(target=_process_writer, args=(sqlite_url, session.id, n, 15))
            for n in range(4)
        ]
        for process in processes:
            process.start()

        def join_all() -> None:
            for process in processes:
                process.join(120)

        await asyncio.to_thread(join_all)
        assert [p.exitcode for p in processes] == [0, 0, 0, 0]
        messages = await store.get_messages(session.id)
        assert [m.position for m in messages] == list(range(4 * 15 * 4))
        texts = _user_texts(messages)
        for start in range(0, len(texts), 4):
            assert len({t.rsplit(" ", 1)[0] for t in texts[start : start + 4]}) == 1
