"""The schema distributed on a local Citus cluster: each call about one session is routed.

Runs with `SESSIONSTORE_TEST_CITUS=1` only (the `citus_cluster` fixture of `tests/conftest.py`
starts a coordinator and two workers); skipped otherwise. The rest of the PostgreSQL store
suite runs on the same cluster then.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from sessionstore import (
    AssistantMessage,
    CompactionConfig,
    FixedCount,
    SessionStore,
    Usage,
    UserMessage,
    build_context,
    compact_session_loops,
    migrate,
)
from tests.citus_cluster import Cluster
from tests.factories import conversation

pytestmark = pytest.mark.postgres

SKIPPED = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|SET|SHOW|SAVEPOINT|RELEASE|select pg_)", re.I)


@contextmanager
def captured(store: SessionStore) -> Iterator[list[tuple[str, Any]]]:
    """Every statement the store sends (text and parameters) while the block runs."""
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *args: Any) -> None:
        if not SKIPPED.match(statement):
            sent.append((statement, params))

    engine = store.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


ONE_LOOP = CompactionConfig(keep_first_turns=1, keep_recent_turns=1, compaction_scope=FixedCount(1))


async def _plan(store: SessionStore, statement: str, params: Any) -> str:
    """Citus's plan of a statement (EXPLAIN, nothing run)."""
    async with store.engine.connect() as conn:
        plan = await conn.exec_driver_sql(f"EXPLAIN {statement}", params)
        lines = [row[0] for row in plan.all()]
        await conn.rollback()
    return "\n".join(lines)


def is_router(plan: str) -> bool:
    """One task on one node, in one step (no subplan or rows pulled to the coordinator)."""
    tasks = re.findall(r"Task Count: (\d+)", plan)
    steps = ("Distributed Subplan", "pull to coordinator", "repartition", "Citus INSERT ... SELECT")
    return tasks == ["1"] and not any(step in plan for step in steps)


async def test_distribute_is_idempotent_and_a_session_call_runs_as_one_task(
    citus_cluster: Cluster,
) -> None:
    url = citus_cluster.url
    await migrate.upgrade(url)
    await migrate.distribute(url, shard_count=8)
    again = await migrate.distribute(url, shard_count=8)
    assert (again.distributed, again.referenced, again.workers) == ([], [], 2)
    assert again.shard_count == 8
    await migrate.upgrade(url)  # a no-op on the distributed schema
    assert await migrate.check(url) == migrate.head()
    placements = citus_cluster.psql(
        citus_cluster.ports[0],
        "SELECT count(DISTINCT nodeport) FROM citus_shards "
        "WHERE table_name = 'sessionstore_messages'::regclass",
    )
    assert placements.strip() == "2"  # the shards are spread over both workers

    async with SessionStore.from_url(url) as store:
        ada = store.for_tenant("citus", "ada")
        with captured(store) as sent:
            session = await ada.create_session()
            sid = session.id
            for turn in range(4):
                await ada.start_loop(sid)
                await ada.append_messages(
                    sid,
                    [
                        UserMessage(content=f"request {turn} " + "word " * 40),
                        *conversation(3),
                        AssistantMessage(content="done " * 30, usage=Usage(input_tokens=10)),
                    ],
                )
            for loop in range(2):  # the second digest extends the first
                if loop:
                    await ada.start_loop(sid)
                    await ada.append_messages(sid, conversation(3))
                await compact_session_loops(ada, sid, config=ONE_LOOP, max_context_tokens=300)
            digest = await ada.get_digest(sid)
            assert digest is not None
            assert digest.extends_id is not None
            await build_context(ada, sid, max_context_tokens=300)
            await ada.get_history(sid)
            await ada.search("request", session_id=sid)
            await ada.usage(sid)
            await store.get_session(sid)  # the unscoped store: the tenant found by the id
            await ada.delete_session(sid)
        assert len(sent) > 30
        for statement, params in sent:
            if "sessionstore_" in statement:  # not the store's one look at pg_extension
                plan = await _plan(store, statement, params)
                assert is_router(plan), f"{statement}\n{plan}"


async def test_0016_goes_down_and_up_again_on_the_distributed_schema(
    citus_cluster: Cluster,
) -> None:
    """The digests' `extends_id` is dropped (every list written whole again, on the shards)
    and added again on distributed tables; the schema is then the head's."""
    url = citus_cluster.url
    await migrate.upgrade(url)
    await migrate.distribute(url, shard_count=8)
    async with SessionStore.from_url(url) as store:
        ada = store.for_tenant("citus", "ada")
        sid = (await ada.create_session()).id
        await ada.append_messages(sid, conversation(3))
        loops = [(await ada.active_chain(sid))[0].id]
        for _ in range(3):
            loops.append((await ada.start_loop(sid, messages=conversation(3))).id)
            await compact_session_loops(ada, sid, config=ONE_LOOP, max_context_tokens=300)
        digest = await ada.get_digest(sid)
        assert digest is not None
        assert digest.extends_id is not None
        await migrate.downgrade(url, "0015_loop_id_key")
        listed = citus_cluster.psql(
            citus_cluster.ports[0],
            f"SELECT folded FROM sessionstore_digests WHERE id = {digest.id} "
            f"AND session_id = '{sid}'",
        )
        whole = loops[: loops.index(digest.through_loop_id) + 1]
        assert len(whole) >= 2
        assert [int(n) for n in re.findall(r"\[(\d+),", listed)] == whole
        await migrate.upgrade(url)
        assert await migrate.check(url) == migrate.head()
        again = await ada.get_digest(sid)
        assert again is not None
        assert (again.id, again.extends_id) == (digest.id, None)  # its whole list now
        await ada.delete_session(sid)
