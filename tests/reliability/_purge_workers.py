"""Child processes for the purge and usage reliability tests (see `_workers` for the model).

A worker reports each acknowledged write on its pipe *after* the call returned: everything
it reported must be in the database afterwards (or, for a purge, gone from it).
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime
from multiprocessing.connection import Connection
from typing import Any

from sessionstore import AssistantMessage, SessionStore, Usage, UserMessage
from tests.reliability._workers import named


def application_name(pid: int) -> str:
    """The name the connections of the worker with this process id give PostgreSQL."""
    return f"sessionstore-test-worker-{pid}"


def _named(url: str) -> dict[str, Any]:
    """Engine options that name this worker's PostgreSQL connections (see `application_name`)."""
    return named(url, application_name(os.getpid()))


def purge_until_killed(url: str, cutoff: str, pipe: Connection) -> None:
    """Purge one session per transaction; send the sessions done after each batch."""

    async def run() -> None:
        async with SessionStore.from_url(url, **_named(url)) as store:
            # A first read, so "ready" means connected and able to write at once.
            await store.list_sessions(limit=1)
            pipe.send(("ready", -1))
            await store.purge(
                older_than=datetime.fromisoformat(cutoff),
                batch_size=1,
                progress=lambda done, _total: pipe.send(("purged", done)),
            )
            pipe.send(("done", -1))
            await asyncio.sleep(3600)  # wait for the kill, as a worker still purging would

    asyncio.run(run())


def record_usage_until_killed(url: str, session_id: str, base: int, pipe: Connection) -> None:
    """Alternate an assistant message carrying usage and a `record_usage`, forever.

    Each call's `input_tokens` is `base + index`, a tag unique to the call; each is sent
    once acknowledged, as ("message", tag) or ("record", tag).
    """

    async def run() -> None:
        async with SessionStore.from_url(url, **_named(url)) as store:
            await store.usage(session_id)
            pipe.send(("ready", -1))
            index = 0
            while True:
                tag = base + index
                if index % 2 == 0:
                    answer = AssistantMessage(
                        content=f"answer {tag}", usage=Usage(input_tokens=tag, output_tokens=1)
                    )
                    await store.append_messages(
                        session_id, [UserMessage(content=f"question {tag}"), answer]
                    )
                    pipe.send(("message", tag))
                else:
                    await store.record_usage(session_id, Usage(input_tokens=tag, output_tokens=2))
                    pipe.send(("record", tag))
                index += 1

    asyncio.run(run())
