"""Tenant isolation of the purge and of usage, beyond one call each (`test_tenant_isolation`).

A tenant's purge counts, deletes and reports only its own sessions: another tenant's
session that cannot be deleted is neither touched nor named in its report. Usage recorded
by two tenants at once stays exact per tenant, and a tenant's purge racing another
tenant's usage records leaves those untouched.
"""

from __future__ import annotations

import asyncio

import pytest

from sessionstore import SessionStore, TenantStore, Usage, UserMessage
from sessionstore.errors import LoopNotFoundError, SessionNotFoundError
from tests.integration.store.test_retention import (
    cutoff_after,
    legal_hold,
    of,
    populate,
    rows_by_session,
)
from tests.reliability._soak import scaled

CALLS = scaled(30)


async def test_a_tenants_purge_counts_deletes_and_reports_only_its_own_sessions(
    store: SessionStore, db_url: str
) -> None:
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    bob_held = await populate(bob)
    bob_others = {await populate(bob), await populate(bob)}
    ada_old = {await populate(ada), await populate(ada)}
    cutoff = await cutoff_after(store, sorted({bob_held, *bob_others, *ada_old}))
    before = await rows_by_session(store)
    bob_ids = {bob_held, *bob_others}

    async with legal_hold(db_url, bob_held):
        dry = await ada.purge(older_than=cutoff, dry_run=True)
        report = await ada.purge(older_than=cutoff, batch_size=1)
        assert (dry.sessions, report.sessions) == (len(ada_old), len(ada_old))
        assert report.failed == []  # bob's held session is not ada's to name
        assert dry.rows == report.rows
        assert await rows_by_session(store) == of(before, bob_ids)
        bobs = await bob.purge(older_than=cutoff, batch_size=1)
    assert [f.session_id for f in bobs.failed] == [bob_held]
    assert bobs.sessions == len(bob_others)
    assert await rows_by_session(store) == of(before, {bob_held})


async def test_usage_recorded_by_two_tenants_at_once_stays_exact_per_tenant(
    store: SessionStore,
) -> None:
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    ada_old, bob_old = await populate(ada), await populate(bob)
    cutoff = await cutoff_after(store, [ada_old, bob_old])
    ada_sid, bob_sid = (await ada.create_session()).id, (await bob.create_session()).id
    (ada_first,) = await ada.append_messages(ada_sid, [UserMessage(content="a")])
    (bob_first,) = await bob.append_messages(bob_sid, [UserMessage(content="b")])

    async def record(handle: TenantStore, sid: str, tokens: int) -> None:
        for _ in range(CALLS):
            await handle.record_usage(sid, Usage(input_tokens=tokens, output_tokens=1))

    *_, purged = await asyncio.gather(
        record(ada, ada_sid, 3),
        record(bob, bob_sid, 7),
        record(bob, bob_old, 11),  # bob's expired session: ada's purge never touches it
        ada.purge(older_than=cutoff),
    )

    assert (purged.sessions, purged.failed) == (1, [])
    with pytest.raises(SessionNotFoundError):
        await ada.get_session(ada_old)
    assert (await ada.usage(ada_sid)).usage == Usage(input_tokens=3 * CALLS, output_tokens=CALLS)
    assert (await bob.usage(bob_sid)).usage == Usage(input_tokens=7 * CALLS, output_tokens=CALLS)
    bob_usage = await bob.usage(bob_old)
    assert bob_usage.calls == CALLS + 1  # populate records one, and every one of bob's is there
    # Each tenant's ids, given to the other, are answered as ids that do not exist.
    for handle, sid, loop_id in ((ada, bob_sid, bob_first.loop_id), (bob, ada_sid, None)):
        with pytest.raises(SessionNotFoundError):
            await handle.usage(sid)
        with pytest.raises(SessionNotFoundError):
            await handle.record_usage(sid, Usage(input_tokens=1))
        if loop_id is not None:
            with pytest.raises(LoopNotFoundError):
                await handle.record_usage(ada_sid, Usage(input_tokens=1), loop_id=loop_id)
    assert (await ada.usage(ada_sid)).calls == CALLS
    assert ada_first.loop_id != bob_first.loop_id
