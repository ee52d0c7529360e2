"""SIGKILL during a purge and during usage recording: nothing half-deleted, nothing half-written.

As in `test_crash_safety.py`, a child process works and reports each acknowledged step on a
pipe, and the test kills it with SIGKILL after a random delay, many times over. A purge
killed at any point leaves each session either whole (every row in every table as it was)
or wholly gone, the sessions it acknowledged gone, the live sessions untouched, and the
next purge finishes the work. Usage recording killed at any point leaves every
acknowledged record, each assistant message with exactly one usage row, and totals that
are the sum of the rows.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from sessionstore import AssistantMessage, Message, SessionStore, Usage, UserMessage
from tests.integration.store.test_retention import populate, rows_by_session
from tests.reliability import _purge_workers, _workers
from tests.reliability._soak import backend_of, record, scaled
from tests.reliability.test_crash_safety import _drain

KILLS = scaled(20)
"""Kills per backend and test in CI; bench/soak_reliability.py scales it up."""

pytestmark = pytest.mark.slow


def _kill_at_random(
    target: Callable[..., None], args: tuple[Any, ...], rng: random.Random, max_delay: float
) -> tuple[list[tuple[str, int]], int]:
    """Start a worker, wait until it is ready (connected), let it run a while, SIGKILL it.

    Returns the worker's reports and its process id (see `_until_its_transactions_ended`).
    """
    ctx = _workers.context()
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=target, args=(*args, child))
    process.start()
    child.close()
    deadline = time.monotonic() + 60
    while not parent.poll(0.05):
        assert process.is_alive(), "the worker died before it was ready"
        assert time.monotonic() < deadline, "the worker did not start"
    reports = [parent.recv()]
    time.sleep(rng.uniform(0, max_delay))
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join(30)
    assert process.exitcode == -signal.SIGKILL, "the worker ended before it was killed"
    reports.extend(_drain(parent))
    return reports, process.pid


async def _until_its_transactions_ended(store: SessionStore, pid: int) -> None:
    """Wait until the killed worker's server processes have ended (`until_server_processes_end`)."""
    await _workers.until_server_processes_end(store, _purge_workers.application_name(pid))


async def _expired(store: SessionStore, count: int, tag: str) -> list[str]:
    """Sessions with rows in many tables: some compacted (blocks, digests), all with usage."""
    ids = []
    for index in range(count):
        if index % 5 == 0:
            ids.append(await populate(store))
            continue
        loops: list[list[Message]] = [
            [
                UserMessage(content=f"{tag} {index} request {n}"),
                AssistantMessage(content="done", usage=Usage(input_tokens=n + 1)),
            ]
            for n in range(3)
        ]
        ids.append((await store.import_session(loops, app_name="app", user_id=tag)).id)
    return ids


def _by_session(counts: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    sessions: dict[str, dict[str, int]] = {}
    for (table, session_id), n in counts.items():
        sessions.setdefault(session_id, {})[table] = n
    return sessions


async def test_sigkill_during_purge_leaves_each_session_whole_or_gone(
    store: SessionStore, db_url: str
) -> None:
    live = await store.create_session(app_name="app", user_id="live")
    rng = random.Random(20261125)
    expired: list[str] = []
    acknowledged = partial_sessions = 0
    for kill in range(KILLS):
        if len(expired) < 8:
            expired += await _expired(store, 12, f"k{kill}")
        cutoff = (await store.get_session(expired[-1])).updated_at + timedelta(microseconds=1)
        await store.append_messages(live.id, [UserMessage(content=f"still here {kill}")])
        updated = {sid: (await store.get_session(sid)).updated_at for sid in expired}
        oldest_first = sorted(expired, key=lambda sid: (updated[sid], sid))
        before = _by_session(await rows_by_session(store))

        reports, pid = _kill_at_random(
            _purge_workers.purge_until_killed, (db_url, cutoff.isoformat()), rng, 0.3
        )
        await _until_its_transactions_ended(store, pid)

        after = _by_session(await rows_by_session(store))
        done = max((n for kind, n in reports if kind == "purged"), default=0)
        assert all(sid not in after for sid in oldest_first[:done]), "an acknowledged purge"
        acknowledged += done
        for sid, rows in before.items():  # whole, or wholly gone
            assert after.get(sid, rows) == rows, sid
        assert after[live.id] == before[live.id]
        expired = [sid for sid in expired if sid in after]
        partial_sessions += sum(1 for sid in before if sid in after and after[sid] != before[sid])

    assert acknowledged > 0, "no purge was acknowledged before a kill"
    report = await store.verify()
    assert report.is_ok, report.problems
    final = await store.purge(older_than=cutoff)
    assert final.failed == []
    assert [s.id for s in (await store.list_sessions()).items] == [live.id]
    record(
        "kill during purge",
        backend_of(db_url),
        kills=KILLS,
        purges_acknowledged=acknowledged,
        half_deleted=partial_sessions,
        lost=0,
    )


async def _usage_rows(store: SessionStore, session_id: str) -> list[Any]:
    async with store.engine.connect() as conn:
        result = await conn.execute(
            text(
                "SELECT message_id, input_tokens, output_tokens FROM sessionstore_usage "
                "WHERE session_id = :sid ORDER BY id"
            ),
            {"sid": session_id},
        )
        return list(result.all())


async def test_sigkill_during_usage_recording_keeps_every_acknowledged_call_once(
    store: SessionStore, db_url: str
) -> None:
    session = await store.create_session(app_name="app", user_id="usage")
    await store.append_messages(session.id, [UserMessage(content="start")])
    rng = random.Random(17)
    acked: dict[str, set[int]] = {"message": set(), "record": set()}
    for kill in range(KILLS):
        reports, pid = _kill_at_random(
            _purge_workers.record_usage_until_killed,
            (db_url, session.id, kill * 1_000_000),
            rng,
            0.25,
        )
        await _until_its_transactions_ended(store, pid)
        for kind, tag in reports:
            if kind in acked:
                acked[kind].add(tag)

    rows = await _usage_rows(store, session.id)
    messages = await store.get_messages(session.id)
    answers = {
        m.id: m.message.usage
        for m in messages
        if isinstance(m.message, AssistantMessage) and m.message.usage is not None
    }
    questions = [m for m in messages if isinstance(m.message, UserMessage)]
    assert len(questions) == len(answers) + 1  # every append whole ("start" has no answer)
    # An appended message's usage is counted from its payload (migration 0011): the rows
    # are record_usage's alone.
    assert [message_id for message_id, _, _ in rows if message_id is not None] == []
    by_message = {mid: usage.input_tokens for mid, usage in answers.items()}
    assert len(set(by_message.values())) == len(by_message), "a message with usage twice"
    recorded = [tokens for _, tokens, _ in rows]
    assert len(recorded) == len(set(recorded)), "a record_usage written twice"
    assert acked["message"] <= set(by_message.values())
    assert acked["record"] <= set(recorded)
    assert acked["message"], "no message with usage was acknowledged before a kill"
    assert acked["record"], "no record_usage was acknowledged before a kill"
    total = await store.usage(session.id)
    assert total.calls == len(rows) + len(answers)
    assert total.usage.input_tokens == sum(recorded) + sum(by_message.values())
    assert total.usage.output_tokens == sum(out for _, _, out in rows) + sum(
        usage.output_tokens for usage in answers.values()
    )
    report = await store.verify()
    assert report.is_ok, report.problems
    record(
        "kill during usage recording",
        backend_of(db_url),
        kills=KILLS,
        acknowledged=len(acked["message"]) + len(acked["record"]),
        rows=len(rows) + len(answers),
        lost=0,
        duplicated=0,
    )
