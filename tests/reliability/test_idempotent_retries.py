"""A client that times out and retries with the same client ids writes each message once.

Each append is given a random deadline of a few milliseconds; when it runs out the call is
cancelled (it may still have been committed) and the client retries the same batch, the
way an agent retries after a timeout. Client ids make the retry a no-op when the first
attempt landed. On a SQLite file a small append runs inline on the event loop (it cannot
time out half-way), so there the batches are one message larger than the inline limit,
which sends them to the worker threads, where a timeout can cancel the wait mid-write.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from sessionstore import SessionStore, UserMessage
from sessionstore.store._engine import INLINE_WRITE_MAX_MESSAGES
from tests.reliability import _workers
from tests.reliability._soak import backend_of, record, scaled

BATCHES = scaled(200)

pytestmark = pytest.mark.slow


async def test_retries_after_timeouts_make_no_duplicates(store: SessionStore, db_url: str) -> None:
    session = await store.create_session(app_name="app", user_id="retry")
    await store.start_loop(session.id)
    rng = random.Random(219)
    timeouts = 0
    on_sqlite = backend_of(db_url) == "sqlite"
    size = INLINE_WRITE_MAX_MESSAGES + 1 if on_sqlite else 3
    batches = BATCHES // 4 if on_sqlite else BATCHES
    for index in range(batches):
        batch = _workers.batch("r", index, size)
        for attempt in range(1_000):
            deadline = rng.uniform(0, 0.0015) if attempt < 5 else None
            try:
                stored = await asyncio.wait_for(store.append_messages(session.id, batch), deadline)
            except TimeoutError:
                timeouts += 1
                continue
            assert [s.message.client_id for s in stored] == [m.client_id for m in batch]
            break
    await asyncio.sleep(0.2)  # let any cancelled call still running in a worker finish

    messages = await store.get_messages(session.id)
    texts = Counter(m.message.text for m in messages if isinstance(m.message, UserMessage))
    assert len(texts) == batches * size
    assert set(texts.values()) == {1}
    assert [m.position for m in messages] == list(range(batches * size))
    # About four timeouts a batch on a quiet machine; on a loaded one the event loop sees
    # more writes finish before their deadline's timer (one CI run: 46 for 50 batches).
    assert timeouts >= batches // 2, f"only {timeouts} timeouts: the deadlines were too generous"
    record(
        "retries after timeouts",
        backend_of(db_url),
        batches=batches,
        timeouts=timeouts,
        duplicates=0,
    )
