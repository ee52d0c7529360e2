"""SIGKILL during the openai-agents adapter's writes: `add_items` batches and `pop_item`.

As in `test_crash_safety`: a child process writes through a `SessionStoreSession` and
reports each acknowledged `add_items` batch (and `pop_item`) on a pipe; once it has
acknowledged a first write, the test kills it with SIGKILL after a random delay, many
times over, on one session. Afterwards every acknowledged batch is there whole, every
batch is all or nothing, every acknowledged pop took exactly its item out, `get_items()`
returns the items as they were added and in their order, `store.verify()` finds nothing
wrong, and the session keeps working (issue 17: the crash suite covers the SDK adapters).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

pytest.importorskip("agents")

from sessionstore import SessionStore
from sessionstore.integrations.openai_agents import SessionStoreSession
from tests.reliability import _sdk_workers
from tests.reliability._soak import backend_of, record, scaled
from tests.reliability.test_crash_safety import _check_messages, _killed

KILLS = scaled(10)
"""Kills per backend and test in CI; bench/soak_reliability.py runs longer soaks."""
SIZE = 6
"""Items an `add_items` batch holds."""

pytestmark = pytest.mark.slow


async def _kill_many(
    store: SessionStore, db_url: str, session_id: str, *, pop: bool, seed: int
) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """Kill `KILLS` workers in turn; return each one's acknowledged batches and pops."""
    rng = random.Random(seed)
    acked: dict[str, set[int]] = {}
    popped: dict[str, set[int]] = {}
    for kill in range(KILLS):
        tag = f"k{kill:02d}"
        reports = await _killed(
            store,
            _sdk_workers.add_until_killed,
            (db_url, session_id, tag, SIZE, pop),
            rng,
            0.25,
            context=_sdk_workers.context,
        )
        assert reports[0] == ("ready", -1), reports
        acked[tag] = {index for kind, index in reports if kind == "ack"}
        popped[tag] = {index for kind, index in reports if kind == "pop"}
    return acked, popped


async def _items_by_batch(
    store: SessionStore, session_id: str
) -> tuple[list[dict[str, Any]], dict[tuple[str, int], list[int]]]:
    """The session's raw items, checked against what `item` makes, grouped by batch."""
    found = await SessionStoreSession(
        session_id, store.for_tenant(_sdk_workers.APP, _sdk_workers.USER)
    ).get_items()
    batches: dict[tuple[str, int], list[int]] = defaultdict(list)
    keys = []
    for got in found:
        tag, index, j = _sdk_workers.text_of(got).split()
        key = (tag, int(index[1:]), int(j[1:]))
        assert got == _sdk_workers.item(*key), got  # valid, and exactly as it was added
        keys.append(key)
        batches[key[0], key[1]].append(key[2])
    assert keys == sorted(keys), "the items are out of order"
    return [dict(got) for got in found], batches


async def test_sigkill_during_add_items_loses_and_splits_no_batch(
    store: SessionStore, db_url: str
) -> None:
    session_id = "sdk-crash-add"
    acked, _ = await _kill_many(store, db_url, session_id, pop=False, seed=20261125)

    await _check_messages(store, session_id)  # the active loop's positions, hashes; verify()
    found, batches = await _items_by_batch(store, session_id)
    for in_batch in batches.values():  # whole, and in one piece
        assert in_batch == list(range(SIZE))
    for tag, indices in acked.items():
        found_indices = sorted(i for t, i in batches if t == tag)
        assert found_indices == list(range(len(found_indices))), tag  # no gap
        assert indices <= set(found_indices), tag
    assert sum(len(i) for i in acked.values()) > 0, "no batch was acknowledged before a kill"
    record(
        "kill during SDK add_items",
        backend_of(db_url),
        kills=KILLS,
        acknowledged_batches=sum(len(i) for i in acked.values()),
        batches_found=len(batches),
        items=len(found),
        lost=0,
    )
    # The session works after: one more batch, and a pop that takes its last item.
    session = SessionStoreSession(session_id, store.for_tenant(_sdk_workers.APP, _sdk_workers.USER))
    await session.add_items(_sdk_workers.items("after", 0, SIZE))  # type: ignore[arg-type]
    assert await session.pop_item() == _sdk_workers.item("after", 0, SIZE - 1)
    assert len(await session.get_items()) == len(found) + SIZE - 1
    assert (await store.verify()).is_ok


async def test_sigkill_during_pop_item_takes_out_exactly_the_acknowledged_items(
    store: SessionStore, db_url: str
) -> None:
    """Each worker adds a batch then pops its last item, over and over: a kill between the
    two leaves that batch whole, a kill inside either leaves it as before the call."""
    session_id = "sdk-crash-pop"
    acked, popped = await _kill_many(store, db_url, session_id, pop=True, seed=1125)

    report = await store.verify()
    assert report.is_ok, report.problems
    found, batches = await _items_by_batch(store, session_id)
    whole = list(range(SIZE))
    for tag, indices in acked.items():
        found_indices = sorted(i for t, i in batches if t == tag)
        assert found_indices == list(range(len(found_indices))), tag  # no gap
        assert indices <= set(found_indices), tag
        for index in found_indices:
            got = batches[tag, index]
            # A popped batch lacks its last item; so does any but the last (its pop may
            # be the one the kill cut, before or after it committed).
            if index in popped[tag] or index != found_indices[-1]:
                assert got == whole[:-1], (tag, index, got)
            else:
                assert got in (whole, whole[:-1]), (tag, index, got)
    assert sum(len(i) for i in popped.values()) > 0, "no pop was acknowledged before a kill"
    record(
        "kill during SDK pop_item",
        backend_of(db_url),
        kills=KILLS,
        acknowledged_batches=sum(len(i) for i in acked.values()),
        acknowledged_pops=sum(len(i) for i in popped.values()),
        items=len(found),
        lost=0,
    )
    # The session works after: a pop takes the newest item there is.
    session = SessionStoreSession(session_id, store.for_tenant(_sdk_workers.APP, _sdk_workers.USER))
    assert await session.pop_item() == found[-1]
    assert await session.get_items() == found[:-1]
    assert (await store.verify()).is_ok
