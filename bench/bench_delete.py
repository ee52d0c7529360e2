"""Measure deleting a session whose loops form one deep chain: the cost per row, by size.

Run from a checkout, with the package installed:

    python bench/bench_delete.py [--sizes 5000,20000,100000] [--postgres-url URL]
                                 [--sqlite-only] [--revision REV] [--json]

For each size N and backend, a fresh database holds two sessions: one with a chain of N
loops (each the child of the one before, one user message each, as in issue 17) and a
small one that must survive. The chain is built with set-based SQL from one loop and one
message the store wrote (building 100,000 loops through `import_session` takes minutes on
PostgreSQL, a few round trips a loop), so every row is a copy of what the store writes,
search index included; at the smallest size `store.verify()` checks the built session.
Then `delete_session` is timed, once: the figure is the wall time, the microseconds per
deleted row (loops + messages) and the ratio of that cost to the smallest size's. A linear
delete keeps the ratio near 1; a quadratic one multiplies it by the size ratio.

`--revision` migrates to an older revision instead of the newest, to measure what the
delete cost before (`--revision 0006_usage`: on SQLite, chains of 1,000+ loops fail with
"too many levels of trigger recursion"; keep the sizes small there, the cost is quadratic).

The URL given for PostgreSQL (or SESSIONSTORE_TEST_POSTGRES_URL) is used as an admin
connection: each size gets a temporary `sessionstore_bench_<random>` database beside it,
dropped at the end. Figures and their reading: docs/benchmarks.md, "Deleting deep chains".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from _common import fmt, log, machine_info, parse_sizes
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from sessionstore import SessionStore, UserMessage, migrate
from sessionstore.errors import StorageError

DEEP = "deep-chain"
OTHER = "survivor"

# One row per loop after the first, with `sequence` 1..N-1 (a recursive CTE: both backends).
_LOOPS = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :last)
INSERT INTO sessionstore_loops (session_id, app_name, user_id, parent_loop_id, sequence, depth,
    created_at, closed_at, message_count, token_total, turn_count, open_tool_call_ids)
SELECT l.session_id, l.app_name, l.user_id, NULL, n.i, n.i, l.created_at, l.created_at,
    l.message_count, l.token_total, l.turn_count, l.open_tool_call_ids
FROM sessionstore_loops l CROSS JOIN n WHERE l.id = :first
"""
_CHAIN = """
UPDATE sessionstore_loops SET parent_loop_id = (
    SELECT p.id FROM sessionstore_loops p
    WHERE p.session_id = sessionstore_loops.session_id
      AND p.sequence = sessionstore_loops.sequence - 1)
WHERE session_id = :sid AND sequence > 0
"""
_MESSAGES = """
INSERT INTO sessionstore_messages (session_id, app_name, user_id, loop_id, position,
    turn_index, kind, payload, token_count, content_hash, created_at)
SELECT m.session_id, m.app_name, m.user_id, l.id, 0, 0, m.kind, m.payload, m.token_count,
    m.content_hash, m.created_at
FROM sessionstore_messages m JOIN sessionstore_loops l ON l.session_id = m.session_id
WHERE m.id = :message AND l.id <> m.loop_id
"""
_ACTIVE = """
UPDATE sessionstore_sessions SET loop_count = :count, active_loop_id = (
    SELECT id FROM sessionstore_loops WHERE session_id = :sid AND sequence = :last)
WHERE id = :sid
"""


@contextlib.asynccontextmanager
async def database(backend: str, admin: str | None) -> AsyncIterator[str]:
    """A fresh, empty database URL; removed at the end."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite+aiosqlite:///{Path(directory) / 'delete.db'}"
        return
    assert admin is not None
    admin_url = make_url(admin).set(drivername="postgresql+asyncpg")
    name = f"sessionstore_bench_{secrets.token_hex(6)}"
    engine = create_async_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        try:
            yield admin_url.set(database=name).render_as_string(hide_password=False)
        finally:
            async with engine.connect() as conn:
                await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await engine.dispose()


async def build(store: SessionStore, loops: int) -> int:
    """Write the deep session (and the survivor); return the rows the delete will remove."""
    await store.create_session(session_id=OTHER, app_name="bench", user_id="u")
    await store.append_messages(OTHER, [UserMessage(content="keep me")])
    await store.create_session(session_id=DEEP, app_name="bench", user_id="u")
    (first,) = await store.append_messages(DEEP, [UserMessage(content="run the tests again")])
    params = {"sid": DEEP, "first": first.loop_id, "last": loops - 1, "count": loops}
    async with store.engine.begin() as conn:
        await conn.execute(sa.text(_LOOPS), params)
        await conn.execute(sa.text(_CHAIN), params)
        await conn.execute(sa.text(_MESSAGES), {"message": first.id})
        await conn.execute(sa.text(_ACTIVE), params)
    chain = await store.active_chain(DEEP, limit=2)
    assert chain[-1].depth == loops - 1, "the loops do not form one chain"
    return 2 * loops  # a loop and its message


async def measure(backend: str, admin: str | None, loops: int, revision: str) -> dict[str, Any]:
    async with database(backend, admin) as url:
        await migrate.upgrade(url, revision)
        async with SessionStore.from_url(url) as store:
            started = time.perf_counter()
            rows = await build(store, loops)
            built = time.perf_counter() - started
            if revision == "head" and loops <= 5_000:
                report = await store.verify()
                assert report.is_ok, report.problems
            log(f"  [{backend}] {loops:,} loops built in {fmt(built)} s; deleting")
            started = time.perf_counter()
            error = None
            try:
                await store.delete_session(DEEP)
            except StorageError as exc:
                error = str(exc)
            seconds = time.perf_counter() - started
            survivor = await store.get_messages(OTHER)
            assert len(survivor) == 1, "the other session lost rows"
    return {
        "backend": backend,
        "loops": loops,
        "rows": rows,
        "seconds": seconds,
        "us_per_row": seconds / rows * 1e6,
        "error": error,
    }


def print_table(results: list[dict[str, Any]]) -> None:
    for backend in ("sqlite", "postgres"):
        rows = [r for r in results if r["backend"] == backend]
        if not rows:
            continue
        base = next((r["us_per_row"] for r in rows if r["error"] is None), None)
        print(f"\n{backend}: delete_session of a chain of N loops (one message each)")
        print(f"{'loops':>9} {'rows':>9} {'seconds':>9} {'µs/row':>8} {'ratio':>6}")
        for r in rows:
            if r["error"] is not None:
                print(f"{r['loops']:>9,} {r['rows']:>9,} {'failed':>9}  {r['error'][:60]}")
                continue
            ratio = r["us_per_row"] / base if base else float("nan")
            print(
                f"{r['loops']:>9,} {r['rows']:>9,} {fmt(r['seconds']):>9} "
                f"{fmt(r['us_per_row']):>8} {ratio:>6.2f}"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=[5_000, 20_000, 100_000])
    parser.add_argument("--postgres-url", default=os.environ.get("SESSIONSTORE_TEST_POSTGRES_URL"))
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--revision", default="head")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    backends = ["sqlite"]
    if args.postgres_url and not args.sqlite_only:
        backends.append("postgres")
    results = []
    for backend in backends:
        for loops in args.sizes:
            results.append(await measure(backend, args.postgres_url, loops, args.revision))
    if args.json:
        print(json.dumps({"machine": machine_info(), "results": results}, indent=2))
    else:
        print_table(results)


if __name__ == "__main__":
    asyncio.run(main())
