"""SIGKILL at random points: acknowledged writes survive, batches and blocks are whole.

A child process appends batches (or alternates appends and compactions) and reports each
acknowledged write on a pipe; once it has acknowledged a first write, the test kills it
with SIGKILL after a random delay, many times over, on one session. Waiting for that first
write (not for the worker's start) is what makes every kill land among writes, however
slow the machine (issue 17, item 11). Afterwards every acknowledged write is present, every batch is
all-or-nothing, positions are contiguous, hashes match the stored messages, every block
reads back whole, the context builds valid, and the store keeps working.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import defaultdict
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any

import pytest

from sessionstore import SessionStore, UserMessage, build_context, compact_session_loops
from sessionstore.models import content_hash, message_payload
from tests.reliability import _workers
from tests.reliability._soak import backend_of, record, scaled

KILLS = scaled(50)
"""Kills per backend and test in CI; bench/soak_reliability.py runs longer soaks."""

pytestmark = pytest.mark.slow


async def _killed(
    store: SessionStore,
    target: Callable[..., None],
    args: tuple[Any, ...],
    rng: random.Random,
    max_delay: float,
    *,
    context: Callable[[], ForkServerContext | SpawnContext] = _workers.context,
) -> list[tuple[str, int]]:
    """Start a worker, wait for its first acknowledged write, let it run a while, SIGKILL it.

    Then wait until the worker's last transaction has ended: a COMMIT it sent just before
    the kill still runs on its PostgreSQL server process
    (`_workers.until_server_processes_end`), and a read of the test's made before it ends
    may miss a write that lands after it. `context` makes the worker processes
    (`_workers.context` preloads the library).
    """
    ctx = context()
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=target, args=(*args, child))
    process.start()
    child.close()
    reports: list[tuple[str, int]] = []
    deadline = time.monotonic() + 120
    while not any(kind != "ready" for kind, _ in reports):  # connected, then one write
        while not parent.poll(0.05):
            assert process.is_alive(), f"the worker died before its first write: {reports}"
            assert time.monotonic() < deadline, f"no write within 120 s: {reports}"
        reports.append(parent.recv())
    await asyncio.sleep(rng.uniform(0, max_delay))
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join(30)
    assert process.exitcode == -signal.SIGKILL, "the worker died before it was killed"
    reports.extend(_drain(parent))
    await _workers.until_server_processes_end(store, _workers.WORKER_NAME)
    return reports


def _drain(pipe: Connection) -> list[tuple[str, int]]:
    reports: list[tuple[str, int]] = []
    while True:
        try:
            if not pipe.poll(0.5):
                return reports
            reports.append(pipe.recv())
        except (EOFError, OSError):  # the writer died; a half-sent report is not an ack
            return reports


async def _check_messages(store: SessionStore, session_id: str) -> list[Any]:
    messages = await store.get_messages(session_id)
    assert [m.position for m in messages] == list(range(len(messages)))
    for stored in messages:
        assert stored.content_hash == content_hash(message_payload(stored.message))
    report = await store.verify()  # hashes, turns, counters, chain and block provenance
    assert report.is_ok, report.problems
    return messages


@pytest.mark.parametrize(
    "worker",
    [_workers.append_until_killed, _workers.compact_until_killed],
    ids=["appends", "compactions"],
)
async def test_every_kill_comes_after_an_acknowledged_write(
    store: SessionStore, db_url: str, worker: Callable[..., None]
) -> None:
    """Killed at once (a delay of 0, as a loaded machine makes any delay), a worker has
    still acknowledged a write: the test waits for one, not for the worker to start."""
    session = await store.create_session(app_name="app", user_id="crash")
    await store.start_loop(session.id)
    rng = random.Random(1)
    for kill in range(5):
        args = (
            db_url,
            session.id,
            f"z{kill}",
            *((25,) if worker is _workers.append_until_killed else ()),
        )
        reports = await _killed(store, worker, args, rng, 0.0)
        assert reports[0] == ("ready", -1)
        assert [kind for kind, _ in reports[1:]], reports
        assert all(kind in ("ack", "turn", "block") for kind, _ in reports[1:]), reports


async def test_sigkill_during_batch_appends_loses_and_splits_nothing(
    store: SessionStore, db_url: str
) -> None:
    session = await store.create_session(app_name="app", user_id="crash")
    await store.start_loop(session.id)
    rng = random.Random(20261122)
    size = 25
    acked: dict[str, set[int]] = {}
    for kill in range(KILLS):
        tag = f"k{kill}"
        reports = await _killed(
            store, _workers.append_until_killed, (db_url, session.id, tag, size), rng, 0.25
        )
        acked[tag] = {index for kind, index in reports if kind == "ack"}

    messages = await _check_messages(store, session.id)
    batches: dict[tuple[str, int], list[int]] = defaultdict(list)
    for stored in messages:
        assert isinstance(stored.message, UserMessage)
        tag, index, _ = stored.message.text.split()
        batches[tag, int(index[1:])].append(stored.position)
    for positions in batches.values():  # whole, and in one piece
        assert len(positions) == size
        assert positions == list(range(positions[0], positions[0] + size))
    for tag, indices in acked.items():
        assert indices <= {i for t, i in batches if t == tag}, tag
    assert sum(len(i) for i in acked.values()) > 0, "no write was acknowledged before a kill"
    record(
        "kill during batch appends",
        backend_of(db_url),
        kills=KILLS,
        acknowledged_batches=sum(len(i) for i in acked.values()),
        batches_found=len(batches),
        messages=len(messages),
        lost=0,
    )
    # The store works after: a retry of a possibly lost batch is deduplicated by client id.
    await store.append_messages(session.id, _workers.batch("k0", 0, size))
    await store.append_messages(session.id, _workers.batch("after", 0, size))
    assert len(await _check_messages(store, session.id)) == len(messages) + size


async def test_sigkill_during_compactions_leaves_whole_blocks_and_a_valid_context(
    store: SessionStore, db_url: str
) -> None:
    session = await store.create_session(app_name="app", user_id="crash")
    await store.start_loop(session.id)
    rng = random.Random(7)
    acked_blocks: set[int] = set()
    for kill in range(KILLS):
        reports = await _killed(
            store, _workers.compact_until_killed, (db_url, session.id, f"c{kill}"), rng, 0.4
        )
        acked_blocks |= {block_id for kind, block_id in reports if kind == "block"}

    messages = await _check_messages(store, session.id)
    assert len(messages) % 4 == 0  # every turn is whole
    (loop,) = await store.list_loops(session.id)
    blocks = await store.block_history(session.id, loop.id)
    assert acked_blocks, "no compaction finished before a kill"
    assert acked_blocks <= {b.id for b in blocks}
    record(
        "kill during compactions",
        backend_of(db_url),
        kills=KILLS,
        acknowledged_blocks=len(acked_blocks),
        blocks_found=len(blocks),
        messages=len(messages),
        lost=0,
    )
    by_id = {m.id: m for m in messages}
    for block in blocks:
        sections = [section for _, section in block.sections()]
        assert sections, "a block without its sections"
        for section in sections:
            assert section.messages, "a section without its replacement messages"
            for replacement in section.messages:
                assert set(replacement.covers) <= by_id.keys()
    context = await build_context(store, session.id, max_context_tokens=200_000)
    assert context.interrupted_calls == []
    assert context.orphan_results == []
    # The store works after: one more turn and one more compaction.
    await store.append_messages(session.id, _workers.turn("after", 0))
    result = await compact_session_loops(store, session.id, config=_workers.COMPACTION)
    assert result.blocks
