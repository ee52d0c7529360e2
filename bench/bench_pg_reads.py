"""Benchmark PostgreSQL decoded reads: the old read path and the new, in one process, interleaved.

Run from a checkout, with the package installed:

    python bench/bench_pg_reads.py --postgres-url URL [--sizes 5000,10000]
                                   [--items small,large] [--repeat 9] [--tail-reads 20]
                                   [--clock cpu|wall]

One history per size and item size (the workload of `bench_peers.py --only api`) is
read by `get_messages` with every `.message` used, the whole loop and its newest 50, two
ways on the same store and rows: `old` (the rows through SQLAlchemy's result processing,
in a transaction block: what the store did before stop 25) and `new` (`read_plain`
straight from asyncpg, no `BEGIN` and `COMMIT`); beside them the OpenAI Agents SDK's
`SQLAlchemySession` and raw asyncpg on the same server. Each run reads with each of
them in turn; the medians are printed with the ratios to `SQLAlchemySession`.

`--clock cpu` (the default) times this process's CPU (`time.process_time`): on a loaded
machine the wall clock moved 4x between runs, the CPU time 20%. It leaves out the
server's work, the same SQL for `old` and `new`, and the round trips the new path saves
(wall clock: `--clock wall`). A temporary database is created beside the URL's and dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import _bench_api
from _common import postgres_database
from bench_peers import OpenAISQLAlchemy
from bench_store import AsyncpgImpl, Impl

from sessionstore.store import _reads
from sessionstore.store._engine import TransactionRunner, normalize_url

_NEW_READ_PLAIN = _reads.read_plain  # type: ignore[attr-defined]  # the module's import
_NEW_RUN = TransactionRunner.run


def _old_read_plain(db: Any, statement: Any, params: Any) -> Any:
    """`read_plain` as before: SQLite's driver only (PostgreSQL rows through SQLAlchemy)."""
    return None if db.dialect.name == "postgresql" else _NEW_READ_PLAIN(db, statement, params)


async def _old_run(self: TransactionRunner, work: Any, **options: Any) -> Any:
    """`TransactionRunner.run` as before: every read in a transaction block."""
    options.pop("snapshot", None)
    return await _NEW_RUN(self, work, **options)


def _use(path: str) -> None:
    old = path == "old"
    _reads.read_plain = _old_read_plain if old else _NEW_READ_PLAIN  # type: ignore[attr-defined]  # the module's import
    TransactionRunner.run = _old_run if old else _NEW_RUN  # type: ignore[method-assign]


async def _case(url: Any, kind: str, n: int, args: argparse.Namespace) -> None:
    ours = _bench_api.DecodedStore(url)
    peers: dict[str, Impl] = {"sdk": OpenAISQLAlchemy(url), "asyncpg": AsyncpgImpl(url)}
    items = _bench_api.api_items(n, kind)
    loops = {}
    for name, impl in (("ours", ours), *peers.items()):
        await impl.open()
        loops[name] = await impl.new_loop("reads")
        await _bench_api._fill(impl, loops[name], items)
        await impl.read(loops[name])
    readers: dict[str, tuple[str, Impl]] = {"old": ("ours", ours), "new": ("ours", ours)}
    readers.update({name: (name, impl) for name, impl in peers.items()})
    clock: Callable[[], float] = time.process_time if args.clock == "cpu" else time.perf_counter
    runs: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.repeat):
            for op, last, count in (("full", None, 1), ("newest 50", 50, args.tail_reads)):
                for path, (loop_name, impl) in readers.items():
                    _use(path)
                    gc.collect()
                    start = clock()
                    for _ in range(count):
                        await impl.read(loops[loop_name], last=last)
                    runs.setdefault((op, path), []).append((clock() - start) * 1000 / count)
    finally:
        _use("new")
        for impl in (ours, *peers.values()):
            await impl.close()
    for op in ("full", "newest 50"):
        median = {path: statistics.median(runs[(op, path)]) for path in readers}
        figures = "  ".join(f"{path} {value:.2f}" for path, value in median.items())
        print(
            f"| {kind} | {n:,} | {op} | {figures} | "
            f"{median['old'] / median['sdk']:.2f}x | {median['new'] / median['sdk']:.2f}x |",
            flush=True,
        )


async def _main(args: argparse.Namespace) -> None:
    admin = normalize_url(args.postgres_url)
    print(f"ms per read ({args.clock} clock), medians of {args.repeat} runs")
    print("| items | N | read | old  new  SQLAlchemySession  asyncpg | old / SDK | new / SDK |")
    for kind in args.items.split(","):
        for n in (int(size) for size in args.sizes.split(",")):
            async with postgres_database(admin) as (url, _version):
                await _case(url, kind, n, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres-url", required=True, help="admin URL of the server")
    parser.add_argument("--sizes", default="5000,10000")
    parser.add_argument("--items", default="small,large")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--tail-reads", type=int, default=20, help="newest-50 reads a run")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
