"""A task that appends in a tight loop does not starve the other tasks of the process.

Small SQLite appends and reads run inline on the event loop when the write lock is free,
so without a yield they would never give the loop back: a second task's calls would wait
until the first task stops. These tests count interleavings (no timing): while one task
appends as fast as it can, another task's calls each complete within a few of its appends.
"""

from __future__ import annotations

import asyncio
from itertools import pairwise

from sessionstore import SessionStore, UserMessage
from tests.integration.store._helpers import new_session

OTHER_CALLS = 20
MAX_APPENDS_BETWEEN = 5
"""The most appends of the busy task while one call of the other task completes."""
SERVER_APPENDS_BETWEEN = 10
"""The same bound on PostgreSQL, where every call waits on the network anyway and so yields;
there the count measures the relative cost of the two calls (and Citus's hops), not a
starvation, so it gets room for a noisy moment."""
TAKING_TURNS = 2
"""The longest run of one of two writers of one session on PostgreSQL, where one store's
appends to a session take turns (1 but for the first call's race to the lock)."""
BUSY_LIMIT = 500
"""The busy task stops after this many appends (a starved other task would wait for it)."""


def _bound(store: SessionStore) -> int:
    return MAX_APPENDS_BETWEEN if store.engine.dialect.name == "sqlite" else SERVER_APPENDS_BETWEEN


async def test_a_tight_append_loop_lets_another_task_complete_its_calls(
    store: SessionStore,
) -> None:
    busy_id = await new_session(store)
    other_id = await new_session(store)
    appended = 0
    stop = asyncio.Event()

    async def busy() -> None:
        nonlocal appended
        while not stop.is_set() and appended < BUSY_LIMIT:
            await store.append_messages(busy_id, [UserMessage(content=f"busy {appended}")])
            appended += 1

    async def other() -> list[int]:
        between: list[int] = []
        for i in range(OTHER_CALLS):
            before = appended
            if i % 2:
                await store.get_messages(other_id, last=5)
            else:
                await store.append_messages(other_id, [UserMessage(content=f"other {i}")])
            between.append(appended - before)
        return between

    # Both sessions have their loop, two connections are ready (PostgreSQL) and the read has
    # run once (its statements prepared): starting a loop, connecting or preparing is not
    # what the counts are about.
    await asyncio.gather(
        store.append_messages(busy_id, [UserMessage(content="first")]),
        store.append_messages(other_id, [UserMessage(content="first")]),
    )
    await asyncio.gather(store.get_messages(busy_id, last=5), store.get_messages(other_id, last=5))
    runner = asyncio.create_task(busy())
    await asyncio.sleep(0)  # the busy task is appending before the other one starts
    try:
        between = await other()
        # Starved, the other task would only have started once the busy one gave up.
        busy_was_running = not runner.done()
    finally:
        stop.set()
        await runner
    assert busy_was_running, f"the other task ran only after {appended} busy appends"
    assert max(between) <= _bound(store), between
    assert sum(between) >= 1  # the busy task did run meanwhile
    assert len(await store.get_messages(other_id)) == 1 + OTHER_CALLS // 2


async def test_two_tasks_appending_to_one_session_interleave(store: SessionStore) -> None:
    """Two writers of one session both make progress, call by call, none starved."""
    session_id = await new_session(store)
    # Two connections ready (PostgreSQL): connecting is not what the order is about.
    await asyncio.gather(store.get_messages(session_id), store.get_messages(session_id))
    order: list[str] = []

    async def writer(name: str) -> None:
        for i in range(30):
            await store.append_messages(session_id, [UserMessage(content=f"{name} {i}")])
            order.append(name)

    await asyncio.gather(writer("a"), writer("b"))
    # Never a long run of one writer while the other one waits. Once a writer has made its
    # last call, the other one's remaining calls follow each other with no one waiting:
    # that run is how far behind it was, not a wait, so the count stops at the first
    # writer's last call.
    last_call = {name: i for i, name in enumerate(order)}
    both_writing = order[: min(last_call.values()) + 1]
    longest = run = 1
    for previous, current in pairwise(both_writing):
        run = run + 1 if current == previous else 1
        longest = max(longest, run)
    # On PostgreSQL (Citus too, whose appends are transactions) one store's appends to one
    # session take turns (`append_turn`): the writers alternate, whatever the pace.
    bound = TAKING_TURNS if store.engine.dialect.name == "postgresql" else _bound(store)
    assert longest <= bound, both_writing
    stored = await store.get_messages(session_id)
    assert len(stored) == 60
