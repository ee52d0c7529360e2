"""Eight writer processes: every message exactly once, positions contiguous; compaction racing
with appends never stands for a message it did not read."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from sessionstore import SessionStore, StoredMessage, UserMessage
from tests.reliability import _workers
from tests.reliability._soak import record, scaled

WRITERS = 8
APPENDS = scaled(500)

pytestmark = pytest.mark.slow


async def _run_workers(target: Callable[..., None], args: list[tuple[Any, ...]]) -> None:
    ctx = _workers.context()
    pipes, processes = [], []
    for worker_args in args:
        parent, child = ctx.Pipe(duplex=False)
        process = ctx.Process(target=target, args=(*worker_args, child))
        process.start()
        child.close()
        pipes.append(parent)
        processes.append(process)

    def join_all() -> None:
        for process in processes:
            process.join(600)

    await asyncio.to_thread(join_all)
    assert [p.exitcode for p in processes] == [0] * len(processes)
    assert [pipe.recv()[0] for pipe in pipes] == ["done"] * len(processes)


def _text(stored: StoredMessage) -> str:
    assert isinstance(stored.message, UserMessage)
    return stored.message.text


def _tags(messages: list[StoredMessage]) -> Counter[str]:
    return Counter(_text(stored) for stored in messages)


async def test_eight_processes_append_to_one_session(store: SessionStore, db_url: str) -> None:
    session = await store.create_session(app_name="app", user_id="many")
    await store.start_loop(session.id)

    await _run_workers(
        _workers.append_many, [(db_url, session.id, f"w{n}", APPENDS) for n in range(WRITERS)]
    )

    messages = await store.get_messages(session.id)
    assert [m.position for m in messages] == list(range(WRITERS * APPENDS))
    expected = {f"w{n} b{i} m0" for n in range(WRITERS) for i in range(APPENDS)}
    counts = _tags(messages)
    assert set(counts) == expected
    assert set(counts.values()) == {1}
    for n in range(WRITERS):  # each writer's own messages keep their order
        mine = [_text(m) for m in messages if _text(m).startswith(f"w{n} ")]
        assert mine == [f"w{n} b{i} m0" for i in range(APPENDS)]
    backend = "postgres" if db_url.startswith("postgresql") else "sqlite"
    record("8 writers, one session", backend, appends=WRITERS * APPENDS, lost=0, duplicated=0)


async def test_eight_processes_append_to_their_own_sessions(
    store: SessionStore, db_url: str
) -> None:
    sessions = [await store.create_session(app_name="app", user_id=f"u{n}") for n in range(WRITERS)]

    await _run_workers(
        _workers.append_many,
        [(db_url, s.id, f"w{n}", APPENDS) for n, s in enumerate(sessions)],
    )

    for n, session in enumerate(sessions):
        messages = await store.get_messages(session.id)
        assert [m.position for m in messages] == list(range(APPENDS))
        assert [_text(m) for m in messages] == [f"w{n} b{i} m0" for i in range(APPENDS)]
    backend = "postgres" if db_url.startswith("postgresql") else "sqlite"
    record("8 writers, own sessions", backend, appends=WRITERS * APPENDS, lost=0, duplicated=0)
