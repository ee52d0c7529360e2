"""A purge racing appends, usage records and searches, each through its own store (pool).

Writers append to expired and live sessions while a purge deletes the expired ones and a
reader searches all along. A write either lands before the purge reaches its session (the
session is then no longer expired, and stays) or finds the session gone (`SessionNotFound
Error`): never both, never half. So every acknowledged write is in a session that still
exists, every expired session without one is gone wholly, the live sessions keep every
row, no search fails, and the store verifies clean.
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest

from sessionstore import SessionStore, Usage, UserMessage
from sessionstore.errors import SessionNotFoundError
from tests.integration.store.test_retention import rows_by_session
from tests.reliability._soak import backend_of, record, scaled
from tests.reliability.test_crash_safety_purge import _expired

WRITERS = 4
WRITES = scaled(25)
EXPIRED = 24

pytestmark = pytest.mark.slow


async def test_purge_racing_appends_usage_and_searches_loses_and_splits_nothing(
    store: SessionStore, db_url: str
) -> None:
    expired = await _expired(store, EXPIRED, "old")
    cutoff = (await store.get_session(expired[-1])).updated_at + timedelta(microseconds=1)
    live = [(await store.create_session(app_name="app", user_id=f"live{n}")).id for n in range(3)]
    for sid in live:
        await store.append_messages(sid, [UserMessage(content="keyword live start")])
    before = await rows_by_session(store)

    acked: dict[str, set[str]] = {}
    refused: set[str] = set()
    searches = 0
    purging = True

    async def writer(n: int) -> None:
        rng = random.Random(n)
        async with SessionStore.from_url(db_url) as own:
            for index in range(WRITES):
                sid = rng.choice(expired + live)
                client_id = f"w{n}-{index}"
                try:
                    if index % 3 == 2:
                        await own.record_usage(sid, Usage(input_tokens=index + 1))
                    else:
                        message = UserMessage(content=f"keyword {client_id}", client_id=client_id)
                        await own.append_messages(sid, [message])
                except SessionNotFoundError:
                    refused.add(sid)
                    continue
                acked.setdefault(sid, set()).add(client_id)
                await asyncio.sleep(0)

    async def searcher() -> None:
        nonlocal searches
        async with SessionStore.from_url(db_url) as own:
            while purging:
                await own.search("keyword", limit=50)
                await own.search("request", limit=50, include_summaries=True)
                searches += 2

    async def purger() -> list[int]:
        nonlocal purging
        try:
            async with SessionStore.from_url(db_url) as own:
                first = await own.purge(older_than=cutoff, batch_size=3)
                again = await own.purge(older_than=cutoff, batch_size=3)
                assert first.failed == again.failed == []
                return [first.sessions, again.sessions]
        finally:
            purging = False

    purge = asyncio.create_task(purger())
    await asyncio.gather(*(writer(n) for n in range(WRITERS)), searcher(), purge)
    purged = purge.result()

    after = await rows_by_session(store)
    present = {sid for _, sid in after}
    assert set(live) <= present
    for sid, client_ids in acked.items():  # an acknowledged write kept its session
        assert sid in present, sid
        stored = {m.message.client_id for m in await store.get_messages(sid)}
        appended = {c for c in client_ids if int(c.split("-")[1]) % 3 != 2}
        assert appended <= stored, sid
    for sid in set(expired) - acked.keys():  # untouched and expired: gone, wholly
        assert sid not in present, sid
    assert refused.isdisjoint(present)  # refused only because it was gone
    assert refused.isdisjoint(acked)
    for (table, sid), count in before.items():  # a survivor kept every row it had
        if sid in present:
            assert after[(table, sid)] >= count, (table, sid)
    assert sum(purged) == len(set(expired) - present)
    assert searches > 0
    report = await store.verify()
    assert report.is_ok, report.problems
    record(
        "purge racing writes and searches",
        backend_of(db_url),
        writes=len([c for ids in acked.values() for c in ids]),
        refused=len(refused),
        purged=sum(purged),
        searches=searches,
        lost=0,
    )
