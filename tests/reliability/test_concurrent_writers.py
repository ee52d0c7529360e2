"""Eight writer processes: every message exactly once, positions contiguous; compaction racing
with appends never stands for a message it did not read.

The race test appends whole agent turns one message a call from three processes while the
test compacts the loop over and over: a tool result that lands while a compaction runs
joins a turn the new block may cover. Every block's sections must stand for exactly the
raw messages of their turns, and the context must show every raw message once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from sessionstore import (
    SessionStore,
    StoredMessage,
    UserMessage,
    build_context,
    compact_session_loops,
)
from sessionstore.errors import LoopChangedError
from tests.integration._helpers import late_orphans
from tests.reliability import _workers
from tests.reliability._soak import backend_of, record, scaled

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
    record(
        "8 writers, one session",
        backend_of(db_url),
        appends=WRITERS * APPENDS,
        lost=0,
        duplicated=0,
    )


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
    record(
        "8 writers, own sessions",
        backend_of(db_url),
        appends=WRITERS * APPENDS,
        lost=0,
        duplicated=0,
    )


async def test_compaction_racing_appends_stands_only_for_what_it_read(
    store: SessionStore, db_url: str
) -> None:
    session = await store.create_session(app_name="app", user_id="race")
    await store.start_loop(session.id)
    writers = asyncio.create_task(
        _run_workers(
            _workers.append_turns_one_by_one, [(db_url, session.id, f"r{n}", 40) for n in range(3)]
        )
    )
    compactions = gave_up = 0
    while not writers.done():
        try:
            await compact_session_loops(store, session.id, config=_workers.COMPACTION)
        except LoopChangedError:  # three reads in a row outrun by appends: nothing written
            gave_up += 1
            continue
        compactions += 1
    await writers

    assert compactions > 1, f"{gave_up} compactions gave up, {compactions} wrote"
    messages = await store.get_messages(session.id)
    assert len(messages) == 3 * 40 * 4
    (loop,) = await store.list_loops(session.id)
    if not await store.block_history(session.id, loop.id):
        # On a loaded machine every racing compaction can come too early (too few turns)
        # or be outrun three times: one more, once the writers are done, writes a block
        # (what the blocks written in the race stand for is checked below either way).
        await compact_session_loops(store, session.id, config=_workers.COMPACTION)
    blocks = await store.block_history(session.id, loop.id)
    assert blocks
    # A section stands for the raw messages of its turns, but for results that joined a
    # turn after it was covered answering none of the calls it waited for (orphans).
    missed = {block.generation or 0: late_orphans(block, messages) for block in blocks}
    context = await build_context(store, session.id, max_context_tokens=1_000_000)
    shown = {i.message_id for i in context.items if i.source == "raw"}
    shown |= {c for i in context.items for c in i.covers if i.source != "raw"}
    # Interleaved writers leave some tool results apart from their call's turn: those are
    # orphans, listed and left out (or, when they joined a covered turn, only left out);
    # every other raw message is shown, once.
    assert shown.isdisjoint(context.orphan_results)
    hidden = missed[max(missed)]
    assert shown | set(context.orphan_results) | hidden == {m.id for m in messages}
