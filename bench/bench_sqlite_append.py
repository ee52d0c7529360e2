"""SQLite batch appends of this tree against a baseline tree, in one run (stop 27).

Each round starts one child process per tree, alternating which goes first: the child
imports sessionstore from its tree, migrates a fresh SQLite file with that tree's
migrations and appends the Python API section's items (`bench_peers.py --only api`) in
batches of 100, batch by batch alternating with the raw sqlite3 floor
(`bench_store.Sqlite3Impl`) and the OpenAI Agents SDK's `SQLiteSession` (when installed),
each on its own file in the same directory. A child's figure is the median of its
batches, in process time (CPU: the SDK store's thread is counted, it is the process's)
and wall time, µs a message; each ratio is taken in one child, so a busy moment of a
shared machine weighs on both sides of it, and its median over the rounds is printed.

    git archive main sessionstore migrations | tar -x -C ../base
    python bench/bench_sqlite_append.py --baseline ../base
    python bench/bench_sqlite_append.py --baseline ../base --sizes large --messages 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLOCKS = ("cpu", "wall")
IMPLS = ("sessionstore", "sqlite3", "oa_sqlite")
"""The implementations' names, as the table prints them."""


async def _child(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Time this tree's batches against the floor and the SDK store; medians, µs a message."""
    from _bench_api import BATCH, DecodedStore, api_items
    from bench_store import Impl, Sqlite3Impl

    from sessionstore import migrate
    from sessionstore.store._engine import normalize_url

    items = api_items(args.messages, args.size)
    times: dict[str, dict[str, list[float]]] = {clock: {} for clock in CLOCKS}
    with tempfile.TemporaryDirectory() as directory:
        url = normalize_url(f"sqlite+aiosqlite:///{Path(directory) / 'sessionstore.db'}")
        await migrate.upgrade(url)
        impls: list[Impl] = [DecodedStore(url), Sqlite3Impl(Path(directory) / "sqlite3.db")]
        try:
            from bench_peers import OpenAISQLite

            impls.append(OpenAISQLite(Path(directory) / "oa_sqlite.db"))
        except ImportError:  # the SDK is not installed
            pass
        for impl in impls:
            await impl.open()
        try:
            for impl in impls:  # tables, connections, statement caches
                warm = await impl.new_loop("warm")
                for item in items[:30]:
                    await impl.append(warm, (item,))
                await impl.append(warm, items[:BATCH])
            loops = {impl.name: await impl.new_loop("batches") for impl in impls}
            for at in range(0, len(items), BATCH):
                batch = items[at : at + BATCH]
                for impl in impls:
                    wall, cpu = time.perf_counter(), time.process_time()
                    await impl.append(loops[impl.name], batch)
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                    times["cpu"].setdefault(impl.name, []).append(cpu * 1e6 / len(batch))
                    times["wall"].setdefault(impl.name, []).append(wall * 1e6 / len(batch))
        finally:
            for impl in impls:
                await impl.close()
    return {
        clock: {name: statistics.median(values) for name, values in by_impl.items()}
        for clock, by_impl in times.items()
    }


def _run(tree: Path, args: argparse.Namespace, size: str) -> dict[str, dict[str, float]]:
    from _common import child_json  # here: the parent imports no sessionstore tree itself

    arguments = ["--size", size, "--messages", str(args.messages)]
    result: dict[str, dict[str, float]] = child_json(__file__, tree, arguments)
    return result


def _median(runs: list[dict[str, Any]], clock: str, impl: str) -> str:
    values = [run[clock][impl] for run in runs if impl in run[clock]]
    return f"{statistics.median(values):.2f}" if values else "-"


def _ratio(runs: list[dict[str, Any]], clock: str, over: str) -> str:
    pairs = [(run[clock]["sessionstore"], run[clock].get(over)) for run in runs]
    ratios = [ours / other for ours, other in pairs if other]
    return f"{statistics.median(ratios):.2f}x" if ratios else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="the baseline source tree")
    parser.add_argument("--sizes", default="small,large", help="item sizes (small,large)")
    parser.add_argument("--messages", type=int, default=5000, help="messages in batches of 100")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (one child a tree each)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--size", default="small", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args))))
        return
    if args.baseline is None:
        parser.error("--baseline is required")
    trees = {"baseline": args.baseline.resolve(), "this tree": HERE.parent}
    print(f"{args.messages} messages in batches of 100; medians of {args.repeat} rounds")
    print(
        "| items | clock | tree | sessionstore µs/msg | raw sqlite3 | SQLiteSession "
        "| / raw sqlite3 | / SQLiteSession |"
    )
    print("|---|---|---|--:|--:|--:|--:|--:|")
    for size in args.sizes.split(","):
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for round_ in range(args.repeat):
            order = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
            for name in order:
                print(f"  [{size}] round {round_ + 1}/{args.repeat}: {name}", file=sys.stderr)
                runs[name].append(_run(trees[name], args, size))
        for clock in CLOCKS:
            for name in trees:
                medians = [_median(runs[name], clock, impl) for impl in IMPLS]
                print(
                    f"| {size} | {clock} | {name} | {' | '.join(medians)} | "
                    f"{_ratio(runs[name], clock, 'sqlite3')} | "
                    f"{_ratio(runs[name], clock, 'oa_sqlite')} |"
                )


if __name__ == "__main__":
    main()
