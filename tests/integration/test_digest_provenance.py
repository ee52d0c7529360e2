"""A session digest names the loops it folds itself and the digest it extends (0016).

Before, each digest listed every loop folded since the root, so a session's digests grew
with the square of its compactions; and a compaction read the whole chain to find the
digest to extend. These check what a digest stores, that the loops it stands for are
still exactly known, and that looking for the chain's digest in a window of its newest
loops answers as reading the whole chain does, branches included.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from sqlalchemy import text

from sessionstore import (
    CompactionConfig,
    FixedCount,
    SessionDigest,
    SessionStore,
    audit_session,
    compact_session_loops,
)
from sessionstore import _context_source as source
from sessionstore.models import CompactionSummaryMessage
from tests.factories import conversation
from tests.integration._helpers import SMALL

ONE_IN_SCOPE = SMALL.model_copy(update={"compaction_scope": FixedCount(1)})


async def _loop(store: SessionStore, session_id: str, parent: int | None = None) -> int:
    loop = await store.start_loop(session_id, parent_loop_id=parent)
    await store.append_messages(session_id, conversation(turns=2), loop_id=loop.id)
    return loop.id


async def _compact(store: SessionStore, session_id: str, config: CompactionConfig) -> None:
    await compact_session_loops(store, session_id, config=config)


async def compacted_session(store: SessionStore, loops: int) -> str:
    """A session of a root and `loops` loops, compacted after each (one loop in scope)."""
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, conversation(turns=2))
    for _ in range(loops):
        await _loop(store, session.id)
        await _compact(store, session.id, ONE_IN_SCOPE)
    return session.id


async def _rows(store: SessionStore, session_id: str) -> list[tuple[int, int | None, Any, int]]:
    """Each digest row of the session: id, extends_id, folded pairs, through_loop_id."""
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT id, extends_id, CAST(folded AS TEXT), through_loop_id "
                "FROM sessionstore_digests WHERE session_id = :sid ORDER BY id"
            ),
            {"sid": session_id},
        )
        return [(r[0], r[1], json.loads(r[2]), r[3]) for r in rows]


def _stands_for(rows: list[tuple[int, int | None, Any, int]], digest_id: int) -> list[int]:
    """The loops a digest stands for: those of the digests it extends, then its own."""
    by_id = {row[0]: row for row in rows}
    found: list[int] = []
    link: int | None = digest_id
    while link is not None:
        _, extends, folded, _ = by_id[link]
        found[:0] = [loop_id for loop_id, _ in folded]
        link = extends
    return found


async def _chain_ids(store: SessionStore, session_id: str, head: int | None = None) -> list[int]:
    chain = await store.chain_blocks(session_id, loop_id=head)
    return [loop.id for loop, _ in chain]


async def _brute_digest(store: SessionStore, session_id: str, head: int) -> int | None:
    """The newest digest written at a loop of the chain ending at `head` (read whole)."""
    ids = set(await _chain_ids(store, session_id, head))
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT id, head_loop_id FROM sessionstore_digests WHERE session_id = :sid"),
            {"sid": session_id},
        )
        return max((row[0] for row in rows if row[1] in ids), default=None)


async def test_each_digest_stores_only_the_loops_it_folds(store: SessionStore) -> None:
    """A digest extends the one before it; the pairs stored grow with the loops folded."""
    session_id = await compacted_session(store, 9)
    rows = await _rows(store, session_id)
    assert len(rows) >= 8
    assert rows[0][1] is None
    for (before, *_), (_, extends, folded, _) in itertools.pairwise(rows):
        assert extends == before
        assert len(folded) == 1  # one loop left the scope since the previous compaction
    chain = await _chain_ids(store, session_id)
    last = rows[-1]
    stands_for = _stands_for(rows, last[0])
    assert stands_for == chain[: chain.index(last[3]) + 1]
    # Linear: every loop folded is stored once, in the digest that folded it.
    assert sum(len(row[2]) for row in rows) == len(stands_for)
    audit = await audit_session(store, session_id)
    assert audit.digested_loop_ids == stands_for
    assert audit.to_dict()["digest"]["folded_loop_ids"] == stands_for
    digest = await store.get_digest(session_id)
    assert digest is not None
    assert digest.id == last[0]
    assert digest.extends_id == rows[-2][0]
    assert [loop_id for loop_id, _ in digest.folded] == [pair[0] for pair in last[2]]


async def test_a_branch_extends_its_own_chain_s_digest(store: SessionStore) -> None:
    """After a branch, the newest digest of the session is another chain's: not extended."""
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, conversation(turns=2))
    main = [(await store.active_chain(session.id))[0].id]
    for _ in range(6):
        main.append(await _loop(store, session.id))
        await _compact(store, session.id, ONE_IN_SCOPE)
    rows = await _rows(store, session.id)
    at = {head: digest_id for digest_id, head in await _heads(store, session.id)}
    fork = main[3]
    branch = [await _loop(store, session.id, parent=fork)]
    branch.append(await _loop(store, session.id))
    await _compact(store, session.id, ONE_IN_SCOPE)
    rows = await _rows(store, session.id)
    new = rows[-1]
    assert new[1] == at[fork]  # the digest written when the fork was the head
    chain = await _chain_ids(store, session.id)
    assert _stands_for(rows, new[0]) == chain[: chain.index(new[3]) + 1]
    for head in [*main, *branch]:
        digest = await store.get_digest(session.id, loop_id=head)
        assert (digest.id if digest else None) == await _brute_digest(store, session.id, head)
    # The other branch's head still finds its own newest digest.
    other = await store.get_digest(session.id, loop_id=main[-1])
    assert other is not None
    assert other.id == at[main[-1]]


async def _heads(store: SessionStore, session_id: str) -> list[tuple[int, int]]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT id, head_loop_id FROM sessionstore_digests WHERE session_id = :sid"),
            {"sid": session_id},
        )
        return [(row[0], row[1]) for row in rows]


async def test_a_window_of_one_loop_answers_as_the_whole_chain(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window grows until it holds what is asked for: with one loop to start, every
    head's digest and a compaction's inputs are the ones the default window gives."""
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, conversation(turns=2))
    heads = [(await store.active_chain(session.id))[0].id]
    for number in range(12):
        heads.append(await _loop(store, session.id))
        if number % 4 == 3:
            await _compact(store, session.id, ONE_IN_SCOPE)
    heads.append(await _loop(store, session.id, parent=heads[6]))

    async def answers() -> list[Any]:
        found: list[Any] = []
        for head in heads:
            digest = await store.get_digest(session.id, loop_id=head)
            chain = await _chain_ids(store, session.id, head)
            inputs = await store.digest_inputs(session.id, first_in_scope=chain[-1], loop_id=head)
            found.append((digest, inputs[0], [loop.id for loop in inputs[1]]))
        return found

    default = await answers()
    assert any(digest is not None for digest, _, _ in default)
    assert any(pending for _, _, pending in default)
    monkeypatch.setattr(source, "DIGEST_WINDOW", 1)
    assert await answers() == default
    for head, (digest, _, _) in zip(heads, default, strict=True):
        assert (digest.id if digest else None) == await _brute_digest(store, session.id, head)


async def test_a_digest_extending_another_session_s_or_overlay_s_is_refused(
    store: SessionStore,
) -> None:
    """Nothing is written when `extends_id` names no digest of the session's overlay."""
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, conversation(turns=2))
    await _loop(store, session.id)
    await _loop(store, session.id)
    await _compact(store, session.id, ONE_IN_SCOPE)
    other = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(other.id, conversation(turns=2))
    (existing,) = await _heads(store, session.id)
    loop = (await store.active_chain(other.id))[-1]
    message = CompactionSummaryMessage(summary="s", tokens_before=1)
    for extends in (existing[0], 10**9):  # another session's digest, and none
        digest = SessionDigest(
            head_loop_id=loop.id,
            through_loop_id=loop.id,
            extends_id=extends,
            message=message,
            token_count=1,
        )
        with pytest.raises(ValueError, match="not one of the session's digests"):
            await store.write_blocks(other.id, [], digest=digest)
    assert await _heads(store, other.id) == []
    # Another overlay of the same session is refused too.
    loop = (await store.active_chain(session.id))[-1]
    digest = SessionDigest(
        overlay="short",
        head_loop_id=loop.id,
        through_loop_id=loop.id,
        extends_id=existing[0],
        message=message,
        token_count=1,
    )
    with pytest.raises(ValueError, match="overlay 'short'"):
        await store.write_blocks(session.id, [], digest=digest)
    assert len(await _heads(store, session.id)) == 1
