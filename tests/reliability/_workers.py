"""Child processes for the reliability tests: they write until they are killed or done.

They run in a forkserver that has already imported the library (`start`), so starting
one costs milliseconds. A worker says "ready" once it has connected (a query ran), then
reports each acknowledged write on its pipe *after* the call returned: everything it
reported must be in the database afterwards.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any

from sqlalchemy import text

from sessionstore import (
    AssistantMessage,
    CompactionConfig,
    Message,
    SessionStore,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    compact_session_loops,
)

WORKER_NAME = "sessionstore-test-crash-worker"
"""The name a crash test's worker gives its PostgreSQL connections (one worker at a time)."""

PRELOAD = [
    "sessionstore",
    "sessionstore.store",
    "sessionstore._compaction",
    "tests.reliability._workers",
]


def named(url: str, name: str) -> dict[str, Any]:
    """Engine options that give a worker's PostgreSQL connections `name` (none on SQLite).

    The test finds the worker's server processes by that name after the kill
    (`until_server_processes_end`).
    """
    if not url.startswith("postgresql"):
        return {}
    return {"connect_args": {"server_settings": {"application_name": name}}}


async def until_server_processes_end(store: SessionStore, name: str) -> None:
    """Wait until the PostgreSQL server processes of a killed worker (by `name`) have ended.

    The kill ends the worker, not its transaction: a COMMIT it sent just before it died is
    still run by its server process, later when the machine is loaded (a pop the test's
    next read does not see yet, then does). Once its server processes are gone, each of
    its transactions is committed or rolled back, and the database is what it will stay.
    SQLite has no server: a killed process's transaction is over when it dies.
    """
    if store.engine.dialect.name != "postgresql":
        return
    query = text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
    deadline = time.monotonic() + 60
    while True:
        async with store.engine.connect() as conn:  # a new transaction: fresh statistics
            if not (await conn.execute(query, {"name": name})).scalar_one():
                return
        assert time.monotonic() < deadline, "the killed worker's server process did not end"
        await asyncio.sleep(0.05)


def context() -> ForkServerContext | SpawnContext:
    """A forkserver context with the library preloaded (spawn where fork is unavailable)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():  # pragma: no cover
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def batch(tag: str, index: int, size: int) -> list[Message]:
    """The `index`-th batch of a writer: `size` user messages with client ids."""
    return [
        UserMessage(content=f"{tag} b{index} m{j}", client_id=f"{tag}-{index}-{j}")
        for j in range(size)
    ]


def turn(tag: str, index: int) -> list[Message]:
    """One agent turn (request, tool call, tool output, answer), appended as one batch."""
    call = f"{tag}-call-{index}"
    return [
        UserMessage(content=f"{tag} request {index}: " + "read the file and fix it " * 20),
        AssistantMessage(
            content=[ToolCall(id=call, name="bash", arguments={"cmd": f"cat f{index}"})]
        ),
        ToolResultMessage(tool_call_id=call, tool_name="bash", content=f"line {index}\n" * 200),
        AssistantMessage(content=f"{tag} done with {index}."),
    ]


def append_until_killed(url: str, session_id: str, tag: str, size: int, pipe: Connection) -> None:
    """Append batches forever; send each batch's index once it is acknowledged."""

    async def run() -> None:
        async with SessionStore.from_url(url, **named(url, WORKER_NAME)) as store:
            await store.check_schema()  # connected: opening a store is lazy
            pipe.send(("ready", -1))
            index = 0
            while True:
                await store.append_messages(session_id, batch(tag, index, size))
                pipe.send(("ack", index))
                index += 1

    asyncio.run(run())


COMPACTION = CompactionConfig(keep_first_turns=1, keep_recent_turns=2, keep_recent_tokens=500)


def compact_until_killed(url: str, session_id: str, tag: str, pipe: Connection) -> None:
    """Alternate appending a turn and compacting; send each turn and each block written."""

    async def run() -> None:
        async with SessionStore.from_url(url, **named(url, WORKER_NAME)) as store:
            await store.check_schema()  # connected: opening a store is lazy
            pipe.send(("ready", -1))
            index = 0
            while True:
                await store.append_messages(session_id, turn(tag, index))
                pipe.send(("turn", index))
                index += 1
                result = await compact_session_loops(store, session_id, config=COMPACTION)
                for block in result.blocks:
                    assert block.id is not None
                    pipe.send(("block", block.id))

    asyncio.run(run())


def append_many(url: str, session_id: str, tag: str, count: int, pipe: Connection) -> None:
    """Append `count` messages one call at a time, then report done."""

    async def run() -> None:
        async with SessionStore.from_url(url, **named(url, WORKER_NAME)) as store:
            for index in range(count):
                await store.append_messages(session_id, batch(tag, index, 1))
        pipe.send(("done", count))

    asyncio.run(run())


def append_turns_one_by_one(
    url: str, session_id: str, tag: str, turns: int, pipe: Connection
) -> None:
    """Append whole agent turns one message per call, so a tool output joins an older turn."""

    async def run() -> None:
        async with SessionStore.from_url(url, **named(url, WORKER_NAME)) as store:
            for index in range(turns):
                for message in turn(tag, index):
                    await store.append_messages(session_id, [message])
        pipe.send(("done", turns))

    asyncio.run(run())
