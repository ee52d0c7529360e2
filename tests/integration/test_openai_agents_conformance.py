"""`SessionStoreSession` against the openai-agents `Session` protocol, as the SDK documents it.

Written from `agents.memory.session.Session`'s docstrings and the behaviour of the SDK's own
`SQLiteSession`, which every test here uses as the reference where the two must agree:

- `get_items()` with no limit returns every item, oldest first;
- `get_items(limit)` returns the newest `limit` items, oldest first (ours never starts the
  window between a call and its output, so it may hold a few fewer);
- `add_items` appends in order, and concurrent adds (first writes on a new session too)
  lose nothing;
- `pop_item()` removes the most recent item and returns it (None when empty);
- `clear_session()` clears every item.

Every test runs on SQLite and PostgreSQL, in raw mode (`max_context_tokens=None`) and in
context mode (`max_context_tokens=128_000`: the built context, which holds every item while
the whole chain fits the window).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, cast

import pytest

pytest.importorskip("agents")

from agents.items import TResponseInputItem
from agents.memory import Session, SQLiteSession

from sessionstore import CompactionConfig, SessionStore, TenantStore, message_tokens
from sessionstore.formats import from_openai_responses
from sessionstore.integrations.openai_agents import SessionStoreSession

Item = dict[str, Any]
MODES = [pytest.param(None, id="raw"), pytest.param(128_000, id="context")]


@pytest.fixture(params=MODES)
def window(request: pytest.FixtureRequest) -> int | None:
    return cast(int | None, request.param)


def tenant(store: SessionStore) -> TenantStore:
    return store.for_tenant("conformance", "user-1")


def session_of(store: SessionStore, window: int | None, session_id: str = "chat") -> Session:
    made = SessionStoreSession(session_id, tenant(store), max_context_tokens=window)
    assert isinstance(made, Session)
    return made


def run(n: int, *, tool: bool) -> list[Item]:
    """One short agent run: a request, perhaps a tool call and its output, an answer."""
    question = f"Run {n}: what is {n} plus {n}? Show the working, then check it once more."
    items: list[Item] = [{"role": "user", "content": question}]
    if tool:
        items += [
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": "add",
                "arguments": json.dumps({"a": n, "b": n}),
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": f"call_{n}", "output": str(2 * n)},
        ]
    items.append(
        {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": f"{n} plus {n} is {2 * n}; adding {n} to {n} once more gives "
                    f"{2 * n} again, so the answer is {2 * n}.",
                    "annotations": [],
                }
            ],
        }
    )
    return items


def chat() -> list[list[Item]]:
    """The issue's chat: 8 short runs, 28 items, about 700 tokens."""
    return [run(n, tool=n % 4 != 3) for n in range(8)]


def interrupted(call_id: str) -> Item:
    output = "[interrupted: no result was recorded for this tool call]"
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def sdk(items: Sequence[Item]) -> list[TResponseInputItem]:
    return cast(list[TResponseInputItem], list(items))


def plain(items: Sequence[TResponseInputItem]) -> list[Item]:
    return [dict(item) for item in items]


async def reference(runs: Sequence[Sequence[Item]]) -> SQLiteSession:
    """The SDK's own session, fed the same batches."""
    session = SQLiteSession("reference")
    for batch in runs:
        await session.add_items(sdk(batch))
    return session


async def fill(session: Session, runs: Sequence[Sequence[Item]]) -> None:
    for batch in runs:
        await session.add_items(sdk(batch))


# ── get_items ──────────────────────────────────────────────────────────────────


async def test_a_session_never_written_has_no_items(
    store: SessionStore, window: int | None
) -> None:
    session = session_of(store, window, "never-written")
    assert await session.get_items() == []
    assert await session.get_items(limit=3) == []
    assert await session.pop_item() is None
    await session.clear_session()
    assert await session.get_items() == []


async def test_get_items_without_a_limit_returns_every_item_in_order(
    store: SessionStore, window: int | None
) -> None:
    runs = chat()
    items = [item for batch in runs for item in batch]
    assert len(items) == 28
    tokens = sum(message_tokens(m) for m in from_openai_responses(items))
    assert 500 <= tokens <= 900  # the 700-token chat
    session = session_of(store, window)
    await fill(session, runs)

    ours = plain(await session.get_items())

    assert ours == items
    assert ours == plain(await (await reference(runs)).get_items())


async def test_every_item_is_returned_while_the_chain_fits_even_with_a_compaction_policy(
    store: SessionStore,
) -> None:
    """Defect 1: a compaction policy must not narrow a context that has room to the
    compaction scope (the current run and the three before it)."""
    runs = chat()
    session = SessionStoreSession(
        "chat", tenant(store), max_context_tokens=128_000, compaction=CompactionConfig()
    )
    await fill(session, runs)
    assert plain(await session.get_items()) == [item for batch in runs for item in batch]


async def test_get_items_with_a_limit_returns_the_newest_items_in_order(
    store: SessionStore, window: int | None
) -> None:
    runs = chat()
    items = [item for batch in runs for item in batch]
    session = session_of(store, window)
    await fill(session, runs)
    sdk_session = await reference(runs)
    # Where a run starts, the newest N items are exactly the SDK's.
    starts = [sum(len(b) for b in runs[i:]) for i in range(len(runs))]
    for limit in [*starts, 1, 2, 3, 5, 27, 28, 29, 1_000]:
        ours = plain(await session.get_items(limit=limit))
        theirs = plain(await sdk_session.get_items(limit=limit))
        assert len(ours) <= limit
        assert ours == items[len(items) - len(ours) :], limit  # a suffix, in order
        assert ours == theirs[len(theirs) - len(ours) :]
        if limit in starts or limit >= len(items):
            assert ours == theirs, limit
        else:  # never more than a call and its output short
            assert len(ours) >= min(limit, len(items)) - 2, limit
    assert await session.get_items(limit=0) == []


async def test_the_settings_limit_is_the_default_limit(
    store: SessionStore, window: int | None
) -> None:
    runs = chat()
    session = SessionStoreSession(
        "chat", tenant(store), max_context_tokens=window, session_settings={"limit": 2}
    )
    await fill(session, runs)
    assert plain(await session.get_items()) == runs[-1]
    assert len(runs[-1]) == 2
    assert len(await session.get_items(limit=100)) == 28


# ── add_items ──────────────────────────────────────────────────────────────────


async def test_add_items_appends_batches_in_order(store: SessionStore, window: int | None) -> None:
    session = session_of(store, window)
    first, second = run(1, tool=True), run(2, tool=False)
    await session.add_items(sdk(first[:2]))
    await session.add_items([])  # nothing to add
    await session.add_items(sdk(first[2:]))
    await session.add_items(sdk(second))
    assert plain(await session.get_items()) == first + second


async def test_another_session_object_sees_the_same_items(
    store: SessionStore, window: int | None
) -> None:
    runs = chat()
    await fill(session_of(store, window), runs)
    again = session_of(store, window)
    assert plain(await again.get_items()) == [item for batch in runs for item in batch]
    assert plain(await session_of(store, window, "other").get_items()) == []


async def test_concurrent_adds_lose_nothing_and_keep_each_batch_whole(
    store: SessionStore, window: int | None
) -> None:
    session = session_of(store, window)
    await session.add_items(sdk(run(0, tool=False)))
    batches = [run(n, tool=True) for n in range(1, 9)]

    await asyncio.gather(*(session_of(store, window).add_items(sdk(b)) for b in batches))

    got = plain(await session.get_items())
    assert len(got) == 2 + 8 * 4
    for batch in batches:
        start = got.index(batch[0])
        assert got[start : start + len(batch)] == batch


async def test_concurrent_first_writes_on_a_new_session_lose_nothing(
    store: SessionStore, window: int | None
) -> None:
    batches = [run(n, tool=n % 2 == 0) for n in range(8)]

    await asyncio.gather(*(session_of(store, window, "fresh").add_items(sdk(b)) for b in batches))

    got = plain(await session_of(store, window, "fresh").get_items())
    assert sorted(json.dumps(i, sort_keys=True) for i in got) == sorted(
        json.dumps(i, sort_keys=True) for b in batches for i in b
    )
    for batch in batches:
        start = got.index(batch[0])
        assert got[start : start + len(batch)] == batch
    assert [s.id for s in (await tenant(store).list_sessions()).items] == ["fresh"]


async def test_a_non_json_item_is_a_type_error_and_nothing_is_written(
    store: SessionStore, window: int | None
) -> None:
    session = session_of(store, window)
    await session.add_items(sdk(run(0, tool=False)))
    for bad in ({"role": "user", "content": {1, 2}}, {"type": "x", "data": object()}):
        with pytest.raises(TypeError, match="not JSON serializable"):
            await session.add_items(sdk([{"role": "user", "content": "ok"}, bad]))
        with pytest.raises(TypeError):  # the SDK's own session says the same
            await SQLiteSession("reference").add_items(sdk([bad]))
    assert plain(await session.get_items()) == run(0, tool=False)


# ── pop_item ───────────────────────────────────────────────────────────────────


async def test_pop_item_removes_and_returns_the_newest_item(
    store: SessionStore, window: int | None
) -> None:
    runs = chat()[:3]
    items = [item for batch in runs for item in batch]
    session = session_of(store, window)
    await fill(session, runs)
    sdk_session = await reference(runs)

    for left in range(len(items), 0, -1):
        popped = await session.pop_item()
        assert popped is not None
        assert dict(popped) == items[left - 1] == dict(await sdk_session.pop_item() or {})
        expected = items[: left - 1]
        if window is not None and expected and expected[-1].get("type") == "function_call":
            # A built context never holds a call without its output (rule 3): the loader
            # answers the call whose output was popped, and says so.
            expected = [*expected, interrupted(expected[-1]["call_id"])]
        assert plain(await session.get_items()) == expected
    assert await session.pop_item() is None
    assert await sdk_session.pop_item() is None


async def test_add_after_pop_continues_the_history(store: SessionStore, window: int | None) -> None:
    session = session_of(store, window)
    first = run(1, tool=True)
    await session.add_items(sdk(first))
    await session.pop_item()
    second = run(2, tool=False)
    await session.add_items(sdk(second))
    assert plain(await session.get_items()) == first[:-1] + second


async def test_pop_item_holds_up_against_three_concurrent_writers(
    store: SessionStore, window: int | None
) -> None:
    """Issue 17, item 7: pop_item gave up with StaleWriteError under ordinary concurrency."""
    session = session_of(store, window)
    await fill(session, [run(n, tool=False) for n in range(10)])

    async def writer(n: int) -> None:
        for k in range(12):
            await session_of(store, window).add_items(
                sdk([{"role": "user", "content": f"{n}.{k}"}])
            )

    async def popper() -> list[TResponseInputItem | None]:
        return [await session_of(store, window).pop_item() for _ in range(10)]

    *_, popped = await asyncio.gather(writer(1), writer(2), writer(3), popper())

    assert all(item is not None for item in popped)
    # Each item popped is gone from the history; everything else is still there.
    got = plain(await session.get_items())
    assert len(got) == 10 * 2 + 3 * 12 - 10


# ── clear_session ──────────────────────────────────────────────────────────────


async def test_clear_session_removes_every_item(store: SessionStore, window: int | None) -> None:
    runs = chat()
    session = session_of(store, window)
    await fill(session, runs)

    await session.clear_session()

    assert await session.get_items() == []
    assert await session.get_items(limit=5) == []
    assert await session.pop_item() is None
    assert await session_of(store, window).get_items() == []
    await session.add_items(sdk(runs[0]))
    assert plain(await session.get_items()) == runs[0]


async def test_clear_session_leaves_other_sessions_alone(
    store: SessionStore, window: int | None
) -> None:
    await fill(session_of(store, window, "a"), chat()[:2])
    await fill(session_of(store, window, "b"), chat()[:1])
    await session_of(store, window, "a").clear_session()
    assert plain(await session_of(store, window, "b").get_items()) == chat()[0]


# ── close ──────────────────────────────────────────────────────────────────────


async def test_close_ends_the_session_object_and_not_the_store(
    store: SessionStore, window: int | None
) -> None:
    session = SessionStoreSession("chat", tenant(store), max_context_tokens=window)
    await session.add_items(sdk(run(0, tool=False)))
    await session.close()
    await session.close()  # a second close is safe
    for call in (
        session.get_items(),
        session.add_items(sdk(run(1, tool=False))),
        session.pop_item(),
        session.clear_session(),
    ):
        with pytest.raises(RuntimeError, match="closed"):
            await call
    # The store is the caller's: it still serves another session object.
    assert plain(await session_of(store, window).get_items()) == run(0, tool=False)
