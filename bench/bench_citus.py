"""Scale-out on a local Citus cluster: sessions over the shards, routed calls, a rebalance.

Starts a coordinator and two workers (three local PostgreSQL instances with Citus, as the
test suite does: `tests/citus_cluster.py`; build Citus first with `shared/citus/build.sh`),
migrates and distributes the schema, then:

1. creates `--sessions` sessions (default 10,000) with one message each, through the
   tenant API, and counts the sessions each worker holds;
2. times `append_messages` (one message a call) and `get_history` of one session on the
   cluster and on single-node PostgreSQL (`--postgres-url`, a scratch database beside it),
   in the same run, and prints the ratios;
3. starts a third worker, adds it and runs `citus_rebalance_start()` while a writer
   appends to sessions all along; when the rebalance is done, every acknowledged append
   must be stored: it prints the sessions per worker after, the appends made during the
   move, and how many were lost (0 expected).

    python bench/bench_citus.py --postgres-url postgresql+asyncpg://postgres@127.0.0.1:5432/postgres

Run it alone: it starts four servers. Figures: docs/benchmarks.md ("Scale-out on Citus").
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sessionstore import SessionStore, UserMessage, make_engine, migrate
from tests.citus_cluster import Cluster, free_ports, start_cluster


async def _per_worker(url: str) -> dict[int, int]:
    """How many sessions each worker holds (by port)."""
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            shards = await conn.execute(
                text(
                    "SELECT get_shard_id_for_distribution_column('sessionstore_sessions', id), "
                    "count(*) FROM sessionstore_sessions GROUP BY 1"
                )
            )
            counts = {int(shard): int(count) for shard, count in shards}
            nodes = await conn.execute(
                text(
                    "SELECT shardid, nodeport FROM citus_shards "
                    "WHERE table_name = 'sessionstore_sessions'::regclass"
                )
            )
            per_port: dict[int, int] = {}
            for shard, port in nodes:
                per_port[int(port)] = per_port.get(int(port), 0) + counts.get(int(shard), 0)
            return dict(sorted(per_port.items()))
    finally:
        await engine.dispose()


async def _fill(store: SessionStore, sessions: int) -> list[str]:
    tenant = store.for_tenant("bench", "user")
    ids: list[str] = []

    async def one(i: int) -> None:
        session = await tenant.create_session(session_id=f"s{i:06d}")
        await tenant.append_messages(session.id, [UserMessage(content=f"hello {i}")])
        ids.append(session.id)

    for start in range(0, sessions, 50):
        await asyncio.gather(*(one(i) for i in range(start, min(start + 50, sessions))))
    return ids


async def _time_calls(store: SessionStore, calls: int) -> dict[str, float]:
    tenant = store.for_tenant("bench", "timing")
    sid = (await tenant.create_session()).id
    started = time.perf_counter()
    for i in range(calls):
        await tenant.append_messages(sid, [UserMessage(content=f"message {i} " * 10)])
    append = (time.perf_counter() - started) / calls * 1000
    reads = []
    for _ in range(20):
        started = time.perf_counter()
        await tenant.get_history(sid)
        reads.append((time.perf_counter() - started) * 1000)
    return {"append_ms": append, "read_ms": statistics.median(reads)}


async def _rebalance_under_writes(cluster: Cluster, ids: list[str]) -> dict[str, int]:
    cluster_url, psql, ports = cluster.url, cluster.psql, cluster.ports
    acknowledged: list[tuple[str, str]] = []
    stop = asyncio.Event()

    async def writer(store: SessionStore, offset: int) -> None:
        tenant = store.for_tenant("bench", "user")
        i = offset
        while not stop.is_set():
            sid = ids[i % len(ids)]
            token = uuid.uuid4().hex
            try:
                await tenant.append_messages(sid, [UserMessage(content=token)])
                acknowledged.append((sid, token))
            except Exception:  # a refused write is not acknowledged
                await asyncio.sleep(0.05)
            i += 7

    async with SessionStore.from_url(cluster_url) as store:
        tasks = [asyncio.create_task(writer(store, n)) for n in range(4)]
        await asyncio.sleep(2)
        psql(ports[0], f"SELECT citus_add_node('127.0.0.1', {ports[3]})")
        psql(ports[0], "SELECT citus_rebalance_start()")
        await asyncio.to_thread(psql, ports[0], "SELECT citus_rebalance_wait()")
        await asyncio.sleep(2)
        stop.set()
        await asyncio.gather(*tasks)
        tenant = store.for_tenant("bench", "user")
        lost = 0
        by_session: dict[str, set[str]] = {}
        for sid, token in acknowledged:
            by_session.setdefault(sid, set()).add(token)
        for sid, tokens in by_session.items():
            stored = " ".join(str(m.message.content) for m in await tenant.get_history(sid))
            lost += sum(token not in stored for token in tokens)
    return {"appends_during_move": len(acknowledged), "lost": lost}


async def run(args: argparse.Namespace, cluster: Cluster) -> None:
    single = make_engine(args.postgres_url, isolation_level="AUTOCOMMIT")
    scratch = f"sessionstore_bench_{uuid.uuid4().hex[:8]}"
    try:
        url = cluster.url
        await migrate.upgrade(url)
        await migrate.distribute(url, shard_count=32)
        async with SessionStore.from_url(url) as store:
            started = time.perf_counter()
            ids = await _fill(store, args.sessions)
            filled = time.perf_counter() - started
        print(f"{args.sessions} sessions created in {filled:.1f} s", flush=True)
        print("sessions per worker:", await _per_worker(url), flush=True)

        async with single.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{scratch}"'))
        single_url = single.url.set(database=scratch)
        await migrate.upgrade(single_url)
        async with SessionStore.from_url(single_url) as store:
            one = await _time_calls(store, args.calls)
        async with SessionStore.from_url(url) as store:
            many = await _time_calls(store, args.calls)
        for name in ("append_ms", "read_ms"):
            print(
                f"{name}: single node {one[name]:.2f}, Citus {many[name]:.2f}, "
                f"ratio {many[name] / one[name]:.2f}",
                flush=True,
            )

        moved = await _rebalance_under_writes(cluster, ids)
        print("after the rebalance, sessions per worker:", await _per_worker(url))
        print(f"appends during the move: {moved['appends_during_move']}, lost: {moved['lost']}")
    finally:
        async with single.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)'))
        await single.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--postgres-url", required=True)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="sessionstore-bench-citus-"))
    base.chmod(0o755)
    cluster = start_cluster(base / "cluster", free_ports(4), registered=2)
    try:
        asyncio.run(run(args, cluster))
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
