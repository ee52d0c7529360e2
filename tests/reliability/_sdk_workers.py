"""Child processes for the SDK adapters' crash tests: `SessionStoreSession` until killed.

Like `_workers`: a worker says "ready" once it has connected, then reports each
acknowledged `add_items` batch and `pop_item` on its pipe *after* the call returned.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any

from sessionstore import SessionStore
from sessionstore.integrations.openai_agents import SessionStoreSession
from tests.reliability._workers import PRELOAD, WORKER_NAME, named

APP, USER = "app", "crash"


def context() -> ForkServerContext | SpawnContext:
    """A forkserver context with the library and the adapter preloaded."""
    if "forkserver" not in multiprocessing.get_all_start_methods():  # pragma: no cover
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([*PRELOAD, "tests.reliability._sdk_workers"])
    return ctx


def item(tag: str, index: int, j: int) -> dict[str, Any]:
    """Item `j` of batch `index`: a user request opens the batch, assistant messages follow."""
    text = f"{tag} b{index} m{j}"
    if j == 0:
        return {"type": "message", "role": "user", "content": text}
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{tag}_{index}_{j}",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def items(tag: str, index: int, size: int) -> list[dict[str, Any]]:
    """The `index`-th `add_items` batch of a writer."""
    return [item(tag, index, j) for j in range(size)]


def text_of(found: Any) -> str:
    """The text of an item `item` made."""
    content = found["content"]
    return content if isinstance(content, str) else content[0]["text"]


def add_until_killed(
    url: str, session_id: str, tag: str, size: int, pop: bool, pipe: Connection
) -> None:
    """Add batches forever (each followed by a `pop_item` when `pop`); report each one acked.

    A pop must return the batch's last item, or the worker dies of the assertion (an exit
    the test tells from its SIGKILL).
    """

    async def run() -> None:
        async with SessionStore.from_url(url, **named(url, WORKER_NAME)) as store:
            await store.check_schema()  # connected: opening a store is lazy
            session = SessionStoreSession(session_id, store.for_tenant(APP, USER))
            pipe.send(("ready", -1))
            index = 0
            while True:
                await session.add_items(items(tag, index, size))  # type: ignore[arg-type]
                pipe.send(("ack", index))
                if pop:
                    popped = await session.pop_item()
                    assert popped == item(tag, index, size - 1), popped
                    pipe.send(("pop", index))
                index += 1

    asyncio.run(run())
