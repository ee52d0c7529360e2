"""Tenant isolation of compaction events and of the tenant handle (issue 10, defect 6).

An event could name another tenant's loop or block: success (or a `StorageError` for an
id that does not exist) told whether the id existed, and when the other tenant deleted its
session, the cascade deleted this tenant's event rows. A tenant handle could also reach
other tenants through `for_tenant`, `.engine` and `.upgrade()`.
"""

from __future__ import annotations

import pytest

from sessionstore import (
    CompactionBlock,
    CompactionStarted,
    SessionStore,
    TurnRange,
    UserMessage,
)
from sessionstore.errors import (
    AmbiguousSessionError,
    BlockNotFoundError,
    LoopNotFoundError,
    SessionExistsError,
)
from sessionstore.store import TenantStore

MISSING = 2**40  # an id no test database reaches


async def _tenant_with_block(handle: TenantStore) -> tuple[str, int, int]:
    """Create a session with one loop and a block; return (session, loop, block) ids."""
    session = await handle.create_session()
    stored = await handle.append_messages(session.id, [UserMessage(content="hi")])
    loop_id = stored[0].loop_id
    block = await handle.write_block(
        session.id,
        loop_id,
        CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=0), strategy="test"),
    )
    assert block.id is not None
    return session.id, loop_id, block.id


async def _refusal(call: object) -> tuple[type[BaseException], str]:
    with pytest.raises((LoopNotFoundError, BlockNotFoundError)) as info:
        await call  # type: ignore[misc]  # a coroutine of the store
    return type(info.value), str(info.value)


async def test_an_event_cannot_name_another_tenants_loop_or_block(store: SessionStore) -> None:
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    ada_sid, ada_loop, _ = await _tenant_with_block(ada)
    _, bob_loop, bob_block = await _tenant_with_block(bob)

    def record(*, loop_id: int | None = None, block_id: int | None = None) -> object:
        return ada.record_compaction_event(
            ada_sid, event="started", tokens_before=1, loop_id=loop_id, block_id=block_id
        )

    # Another tenant's id is refused exactly like an id that does not exist: no oracle.
    foreign = await _refusal(record(loop_id=bob_loop))
    missing = await _refusal(record(loop_id=MISSING))
    assert foreign[0] is missing[0] is LoopNotFoundError
    assert foreign[1] == missing[1].replace(str(MISSING), str(bob_loop))
    foreign = await _refusal(record(block_id=bob_block))
    missing = await _refusal(record(block_id=MISSING))
    assert foreign[0] is missing[0] is BlockNotFoundError
    assert foreign[1] == missing[1].replace(str(MISSING), str(bob_block))
    foreign = await _refusal(record(loop_id=ada_loop, block_id=bob_block))
    missing = await _refusal(record(loop_id=ada_loop, block_id=MISSING))
    assert foreign[1] == missing[1].replace(str(MISSING), str(bob_block))
    assert await ada.list_compaction_events(ada_sid) == []


async def test_write_blocks_events_cannot_name_another_tenants_loop(store: SessionStore) -> None:
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    ada_sid, ada_loop, _ = await _tenant_with_block(ada)
    _, bob_loop, _ = await _tenant_with_block(bob)
    before = await ada.get_session(ada_sid)

    def started(loop_id: int) -> CompactionStarted:
        return CompactionStarted(
            session_id=ada_sid,
            current_loop_id=loop_id,
            loop_ids=[loop_id],
            tokens_before=1,
            strategy="test",
            overlay="default",
        )

    foreign = await _refusal(ada.write_blocks(ada_sid, [], events=[started(bob_loop)]))
    missing = await _refusal(ada.write_blocks(ada_sid, [], events=[started(MISSING)]))
    assert foreign[0] is missing[0] is LoopNotFoundError
    assert foreign[1] == missing[1].replace(str(MISSING), str(bob_loop))
    assert await ada.list_compaction_events(ada_sid) == []
    assert (await ada.get_session(ada_sid)).version == before.version
    await ada.write_blocks(ada_sid, [], events=[started(ada_loop)])
    assert len(await ada.list_compaction_events(ada_sid)) == 1


async def test_deleting_another_tenants_session_leaves_this_tenants_rows(
    store: SessionStore,
) -> None:
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    ada_sid, ada_loop, ada_block = await _tenant_with_block(ada)
    bob_sid, bob_loop, bob_block = await _tenant_with_block(bob)
    await ada.record_compaction_event(
        ada_sid, event="started", tokens_before=1, loop_id=ada_loop, block_id=ada_block
    )
    for loop_id, block_id in ((bob_loop, None), (None, bob_block)):
        with pytest.raises((LoopNotFoundError, BlockNotFoundError)):
            await ada.record_compaction_event(
                ada_sid, event="ended", tokens_before=1, loop_id=loop_id, block_id=block_id
            )
    await bob.delete_session(bob_sid)
    events = await ada.list_compaction_events(ada_sid)
    assert [(e.loop_id, e.block_id) for e in events] == [(ada_loop, ada_block)]
    assert len(await ada.get_messages(ada_sid)) == 1
    assert await ada.get_block(ada_sid, ada_loop) is not None


def test_a_tenant_handle_reaches_only_its_tenant(store: SessionStore) -> None:
    ada = store.for_tenant("app", "ada")
    assert isinstance(ada, TenantStore)
    assert not issubclass(TenantStore, SessionStore)
    assert ada.tenant == ("app", "ada")
    for name in ("for_tenant", "engine", "upgrade", "check_schema", "close"):
        assert not hasattr(ada, name), name


async def test_a_session_id_is_per_tenant_and_creating_it_reveals_nothing(
    store: SessionStore,
) -> None:
    """Issue 17, item 9: an id another tenant uses is free for this one, and tells nothing.

    `create_session(session_id=...)` with bob's id used to raise `SessionExistsError` for
    ada: an oracle for which ids other tenants use. Ids are per tenant now.
    """
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    await bob.create_session(session_id="shared", title="bob's")
    bob_history = await bob.append_messages("shared", [UserMessage(content="bob's secret")])

    # Exactly as with an id no one uses: created, ada's own, empty.
    mine = await ada.create_session(session_id="shared", title="ada's")
    unused = await ada.create_session(session_id="unused", title="ada's")
    assert mine.model_dump(exclude={"id", "created_at", "updated_at"}) == unused.model_dump(
        exclude={"id", "created_at", "updated_at"}
    )
    assert await ada.get_history("shared") == []
    ada_history = await ada.append_messages("shared", [UserMessage(content="ada's note")])
    assert await ada.get_history("shared") == ada_history
    assert await bob.get_history("shared") == bob_history
    assert ada_history[0].loop_id != bob_history[0].loop_id
    [hit] = await ada.search("note")
    assert (hit.session_id, hit.message_id) == ("shared", ada_history[0].id)
    assert await ada.search("secret") == []
    imported = await ada.import_session([[UserMessage(content="x")]], session_id="imported")
    assert (await bob.import_session([[UserMessage(content="y")]], session_id="imported")).id == (
        imported.id
    )

    # Within one tenant the id is taken.
    with pytest.raises(SessionExistsError):
        await ada.create_session(session_id="shared")
    with pytest.raises(SessionExistsError):
        await store.create_session(session_id="shared", app_name="app", user_id="bob")

    # The unscoped store names a session by its id alone: such an id is ambiguous there.
    with pytest.raises(AmbiguousSessionError, match="for_tenant"):
        await store.get_session("shared")
    with pytest.raises(AmbiguousSessionError):
        await store.append_messages("shared", [UserMessage(content="whose?")])
    assert await bob.get_history("shared") == bob_history

    # Deleting ada's session leaves bob's whole (the cascade and its triggers go by the key).
    await ada.delete_session("shared")
    assert await bob.get_history("shared") == bob_history
    assert (await store.get_session("shared")).user_id == "bob"
    page = await store.list_sessions(app_name="app", limit=1)
    listed = [page.items[0].id]
    while page.next_cursor:
        page = await store.list_sessions(app_name="app", limit=1, cursor=page.next_cursor)
        listed += [session.id for session in page.items]
    assert sorted(listed) == ["imported", "imported", "shared", "unused"]
    assert (await store.verify()).is_ok
