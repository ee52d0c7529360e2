"""A write waiting for a lock another process holds never blocks the event loop.

Small SQLite appends run on the event loop's thread when the write lock is free; these
tests hold the lock from another process and check that the loop keeps running while an
append waits, and that the append lands once the lock is released. On PostgreSQL the
other process holds the session's row lock, which the append must wait for too.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from sessionstore import SessionStore, UserMessage, migrate
from tests.integration.store._helpers import new_session

HOLD_S = 1.5
"""How long the other process holds the lock."""
MAX_GAP_S = 0.2
"""The longest the event loop may go without running the ticker (generous: a shared CI box)."""
TICK_S = 0.01


def _hold_lock(url: str, session_id: str, ready: EventType, hold_s: float) -> None:
    """Take the write lock (SQLite) or the session's row lock (PostgreSQL), hold it, release."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        import sqlite3

        connection = sqlite3.connect(parsed.database or "", isolation_level=None)
        connection.execute("BEGIN EXCLUSIVE")
        ready.set()
        time.sleep(hold_s)
        connection.execute("COMMIT")
        connection.close()
        return

    import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type hints

    async def hold() -> None:
        dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        connection = await asyncpg.connect(dsn)
        try:
            async with connection.transaction():
                await connection.execute(
                    "SELECT 1 FROM sessionstore_sessions WHERE id = $1 FOR UPDATE", session_id
                )
                ready.set()
                await asyncio.sleep(hold_s)
        finally:
            await connection.close()

    asyncio.run(hold())


async def _ticker(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(TICK_S)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 3], ids=["one", "batch"])
async def test_append_waiting_for_another_process_keeps_the_loop_running(
    db_url: str, store: SessionStore, count: int
) -> None:
    session_id = await new_session(store)
    await store.append_messages(session_id, [UserMessage(content="before")])
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold_lock, args=(db_url, session_id, ready, HOLD_S))
    holder.start()
    try:
        assert await asyncio.to_thread(ready.wait, 60), "the lock holder did not start"
        gaps: list[float] = []
        stop = asyncio.Event()
        ticker = asyncio.create_task(_ticker(gaps, stop))
        started = time.perf_counter()
        batch = [UserMessage(content=f"while locked {i}") for i in range(count)]
        stored = await store.append_messages(session_id, batch)
        waited = time.perf_counter() - started
        stop.set()
        await ticker
    finally:
        await asyncio.to_thread(holder.join, 60)
    assert holder.exitcode == 0
    # The append really waited for the lock (it was held for HOLD_S from before it began) ...
    assert waited > HOLD_S / 3
    # ... and the loop kept running the whole time.
    assert len(gaps) > waited / (4 * TICK_S)
    assert max(gaps) < MAX_GAP_S
    assert [m.position for m in stored] == list(range(1, 1 + count))
    assert [m.position for m in await store.get_messages(session_id)] == list(range(1 + count))


@pytest.mark.slow
async def test_an_append_cancelled_while_it_waits_writes_all_or_nothing(
    db_url: str, store: SessionStore
) -> None:
    """Cancelling an append that waits for a lock leaves the batch whole or absent."""
    session_id = await new_session(store)
    await store.append_messages(session_id, [UserMessage(content="before")])
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold_lock, args=(db_url, session_id, ready, HOLD_S / 2))
    holder.start()
    try:
        assert await asyncio.to_thread(ready.wait, 60), "the lock holder did not start"
        batch = [UserMessage(content=f"cancelled {i}") for i in range(5)]
        task = asyncio.create_task(store.append_messages(session_id, batch))
        await asyncio.sleep(0.2)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await asyncio.to_thread(holder.join, 60)
    assert holder.exitcode == 0
    # On SQLite the transaction already handed to a worker thread still runs to its end:
    # wait until the database is quiet, then check what is there.
    deadline = time.perf_counter() + 2
    while True:
        texts = [m.message.text for m in await store.get_messages(session_id)]  # type: ignore[union-attr]  # user messages only
        if len(texts) == 6 or time.perf_counter() > deadline:
            break
        await asyncio.sleep(0.1)
    assert texts in (["before"], ["before", *(f"cancelled {i}" for i in range(5))])
    stored = await store.append_messages(session_id, [UserMessage(content="after")])
    assert stored[0].position == len(texts)


@pytest.mark.slow
async def test_a_small_read_locked_out_waits_in_a_worker_not_on_the_loop(tmp_path: Path) -> None:
    """A read of the newest few runs inline on SQLite; locked out, it waits in a worker thread.

    Another connection holds the database in exclusive locking mode (nothing else can even
    open it), so the inline attempt is refused at once and the read waits for the lock in
    a worker thread, the event loop running meanwhile; it returns once the lock goes.
    """
    import sqlite3
    import threading

    path = tmp_path / "locked.db"
    url = f"sqlite+aiosqlite:///{path}"
    await migrate.upgrade(url)
    async with SessionStore.from_url(url) as writer:
        session_id = await new_session(writer)
        await writer.append_messages(session_id, [UserMessage(content=f"m{i}") for i in range(5)])
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("SELECT count(*) FROM sessionstore_sessions").fetchone()

    def release() -> None:
        time.sleep(HOLD_S)
        holder.execute("COMMIT")
        holder.execute("PRAGMA locking_mode=NORMAL")
        holder.execute("SELECT count(*) FROM sessionstore_sessions").fetchone()  # drops it
        holder.close()

    releaser = threading.Thread(target=release)
    releaser.start()
    try:
        async with SessionStore.from_url(url) as reader:
            gaps: list[float] = []
            stop = asyncio.Event()
            ticker = asyncio.create_task(_ticker(gaps, stop))
            started = time.perf_counter()
            newest = await reader.get_messages(session_id, last=3)
            waited = time.perf_counter() - started
            stop.set()
            await ticker
    finally:
        releaser.join(60)
    assert [m.position for m in newest] == [2, 3, 4]
    assert waited > HOLD_S / 3  # it really waited for the lock ...
    assert max(gaps) < MAX_GAP_S  # ... off the event loop
