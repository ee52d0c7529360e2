"""Tenant isolation through the SDK adapters: `SessionStoreSession` and the pydantic-ai helpers.

Two tenants share a store. Session ids are unique across tenants (the documented exception
of `test_tenant_isolation`), so two tenants never hold the same id: a tenant's adapter
given the other's id sees an empty session (`get_items`, `pop_item`, `clear_session`,
`build_message_history`) or gets a typed `SessionNotFoundError` (`add_items`,
`replace_items`, `save_model_messages`, a forced compaction), never the other's items,
and every row of the other's session stays byte-for-byte the same. On their own ids, two
tenants working at once through the adapters only ever see, pop and clear their own items
(issue 17: the isolation suite covers the SDK adapters).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)

from sessionstore import SessionStore, TenantStore
from sessionstore.integrations.openai_agents import SessionStoreSession
from sessionstore.integrations.pydantic_ai import (
    build_message_history,
    save_model_messages,
)
from tests.reliability._sdk_workers import item, items, text_of
from tests.reliability._soak import scaled
from tests.reliability.test_tenant_isolation import snapshot

ROUNDS = scaled(8)
WINDOW = 100_000


def _run(tag: str, index: int) -> list[ModelMessage]:
    """One pydantic-ai run: a prompt and its answer."""
    return [
        ModelRequest(parts=[UserPromptPart(content=f"{tag} prompt {index}")]),
        ModelResponse(parts=[TextPart(content=f"{tag} answer {index}")]),
    ]


def _texts(messages: list[ModelMessage]) -> list[str]:
    """The prompts and answers of a history, in order."""
    return [
        str(part.content)
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart | TextPart)
    ]


async def _owned(handle: TenantStore, sid: str, tag: str) -> list[dict[str, Any]]:
    """A session of `handle`'s with two batches (one popped from), through the adapter."""
    session = SessionStoreSession(sid, handle)
    await session.add_items(items(tag, 0, 3))  # type: ignore[arg-type]
    await session.add_items(items(tag, 1, 3))  # type: ignore[arg-type]
    assert await session.pop_item() == item(tag, 1, 2)
    found = [dict(got) for got in await session.get_items()]
    assert found == [*items(tag, 0, 3), *items(tag, 1, 2)]
    return found


def _intruders(store: SessionStore, sid: str) -> list[SessionStoreSession]:
    """Bob's adapters on `sid`: scoped, unscoped with a tenant, raw and built, with a limit."""
    bob = store.for_tenant("app", "bob")
    return [
        SessionStoreSession(sid, bob),
        SessionStoreSession(sid, store, app_name="app", user_id="bob"),
        SessionStoreSession(sid, bob, max_context_tokens=WINDOW),
        SessionStoreSession(sid, bob, session_settings={"limit": 2}),
    ]


@pytest.mark.parametrize("made_by", ["openai-agents", "pydantic-ai"])
async def test_another_tenants_id_is_a_session_of_ones_own(
    store: SessionStore, made_by: str
) -> None:
    """Session ids are per tenant (issue 17, item 9): bob's adapters on the id ada uses
    see an empty session, and what bob writes there lands in a session of bob's own;
    not one of ada's rows changes, and neither sees the other's items."""
    ada = store.for_tenant("app", "ada")
    sid = "shared-id"
    if made_by == "openai-agents":
        ada_items = await _owned(ada, sid, "ada")
    else:
        await save_model_messages(ada, sid, _run("ada", 0))
        ada_items = [dict(got) for got in await SessionStoreSession(sid, ada).get_items()]
    before = await snapshot(store, sid, ("app", "ada"))
    bob = store.for_tenant("app", "bob")

    for session in _intruders(store, sid):
        assert await session.get_items() == []
        assert await session.get_items(limit=1) == []
        assert await session.pop_item() is None
        await session.clear_session()  # nothing of bob's to clear
    assert await build_message_history(bob, sid, max_context_tokens=WINDOW) == []

    # Bob writes under the same id: his own session, never ada's.
    mine = SessionStoreSession(sid, bob)
    await mine.add_items(items("bob", 0, 2))  # type: ignore[arg-type]
    assert await mine.get_items() == items("bob", 0, 2)
    await save_model_messages(bob, sid, _run("bob", 1))
    assert all(
        text.startswith("bob")
        for text in _texts(await build_message_history(bob, sid, max_context_tokens=WINDOW))
    )

    assert await snapshot(store, sid, ("app", "ada")) == before  # every row of ada's, as it was
    assert await SessionStoreSession(sid, ada).get_items() == ada_items
    history = await build_message_history(ada, sid, max_context_tokens=WINDOW)
    assert _texts(history)
    assert all(text.startswith("ada") for text in _texts(history))


async def _work(handle: TenantStore, tag: str) -> list[dict[str, Any]]:
    """Add, pop, clear and replace through both adapters; return the items it expects."""
    session = SessionStoreSession(f"{tag}-sid", handle)
    expected: list[dict[str, Any]] = []
    for index in range(ROUNDS):
        batch = items(tag, index, 3)
        await session.add_items(batch)  # type: ignore[arg-type]
        expected += batch
        if index % 3 == 1:
            assert await session.pop_item() == expected.pop()
        if index % 4 == 2:
            await session.clear_session()
            expected = []
        if index % 5 == 3:
            expected = items(tag, 100 + index, 2)
            await session.replace_items(expected)  # type: ignore[arg-type]
        assert await session.get_items() == expected
        await asyncio.sleep(0)  # let the other tenant's writes land in between
    runs = f"{tag}-runs"
    for index in range(ROUNDS):
        await save_model_messages(handle, runs, _run(tag, index))
        await asyncio.sleep(0)
    history = await build_message_history(handle, runs, max_context_tokens=WINDOW)
    assert _texts(history) == [text for index in range(ROUNDS) for text in _texts(_run(tag, index))]
    return expected


async def test_two_tenants_at_once_see_pop_and_clear_only_their_own_items(
    store: SessionStore,
) -> None:
    ada, bob = store.for_tenant("app", "ada"), store.for_tenant("app", "bob")
    ada_expected, bob_expected = await asyncio.gather(_work(ada, "ada"), _work(bob, "bob"))

    for handle, tag, expected, other in (
        (ada, "ada", ada_expected, "bob"),
        (bob, "bob", bob_expected, "ada"),
    ):
        found = await SessionStoreSession(f"{tag}-sid", handle).get_items()
        assert found == expected
        assert all(text_of(got).startswith(tag) for got in found)
        # Each one's ids, given to the other, are sessions it cannot see.
        for sid in (f"{other}-sid", f"{other}-runs"):
            assert await SessionStoreSession(sid, handle).get_items() == []
            assert await SessionStoreSession(sid, handle).pop_item() is None
            assert await build_message_history(handle, sid, max_context_tokens=WINDOW) == []
    # Nothing of the one's was popped or cleared by the other's calls just above.
    assert await SessionStoreSession("ada-sid", ada).get_items() == ada_expected
    assert await SessionStoreSession("bob-sid", bob).get_items() == bob_expected
    report = await store.verify()
    assert report.is_ok, report.problems
