"""PostgreSQL appends of this tree against a baseline tree, in one run (stop 25).

Each round starts one child process per tree, alternating which goes first: the child
imports sessionstore from its tree, creates a temporary database beside `--postgres-url`
with that tree's migrations, and times, call by call alternating with raw asyncpg on the
same database (`bench_store.AsyncpgImpl`, one transaction a call), the appends of the
Python API section of `bench_peers.py --only api` (its items): `--messages` messages in
batches of 100, then `--single` one-message appends. A child's figure is the median of
its calls (ms a message), which a busy moment of a shared machine moves less than a total.
It prints each tree's median over the rounds and the median of its ratios to raw asyncpg,
each ratio taken in one child, so a busy moment weighs on both sides of it.

    git archive main sessionstore migrations | tar -x -C ../base
    python bench/bench_pg_append.py --baseline ../base
    python bench/bench_pg_append.py --baseline ../base --sizes large --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve().parent
OPERATIONS = ("append_one", "append_batch")


async def _child(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Time this process's sessionstore against raw asyncpg on a database of its own.

    Call by call, the two alternating; the medians of the calls (ms a message).
    """
    from _bench_api import BATCH, DecodedStore, api_items
    from _common import postgres_database
    from bench_store import AsyncpgImpl

    many, single = api_items(args.messages, args.size), api_items(args.single, args.size)
    times: dict[str, dict[str, list[float]]] = {op: {} for op in OPERATIONS}
    async with postgres_database(make_url(args.postgres_url)) as (url, _version):
        impls = [DecodedStore(url), AsyncpgImpl(url)]
        for impl in impls:
            await impl.open()
        try:
            for impl in impls:  # connections and prepared statements
                warm = await impl.new_loop("warm")
                for item in many[:30]:
                    await impl.append(warm, (item,))
            for op, calls in (
                ("append_batch", [many[i : i + BATCH] for i in range(0, len(many), BATCH)]),
                ("append_one", [(item,) for item in single]),
            ):
                loops = {impl.name: await impl.new_loop(op) for impl in impls}
                for items in calls:
                    for impl in impls:
                        start = time.perf_counter()
                        await impl.append(loops[impl.name], items)
                        elapsed = (time.perf_counter() - start) * 1000 / len(items)
                        times[op].setdefault(impl.name, []).append(elapsed)
        finally:
            for impl in impls:
                await impl.close()
    return {
        op: {name: statistics.median(values) for name, values in by_impl.items()}
        for op, by_impl in times.items()
    }


def _run(tree: Path, args: argparse.Namespace, size: str) -> dict[str, dict[str, float]]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--postgres-url",
        args.postgres_url,
        "--size",
        size,
        "--messages",
        str(args.messages),
        "--single",
        str(args.single),
    ]
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{HERE}"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result: dict[str, dict[str, float]] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="the baseline source tree")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("SESSIONSTORE_TEST_POSTGRES_URL"),
        help="admin URL; temporary databases are created beside it",
    )
    parser.add_argument("--sizes", default="small,large", help="item sizes (small,large)")
    parser.add_argument("--messages", type=int, default=3000, help="messages in batches of 100")
    parser.add_argument("--single", type=int, default=200, help="one-message appends a run")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (one child a tree each)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--size", default="small", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.postgres_url:
        parser.error("--postgres-url or SESSIONSTORE_TEST_POSTGRES_URL is required")
    if args.child:
        print(json.dumps(asyncio.run(_child(args))))
        return
    if args.baseline is None:
        parser.error("--baseline is required")
    trees = {"baseline": args.baseline.resolve(), "this tree": HERE.parent}
    print(f"{args.messages} messages in batches of 100, {args.single} one-message appends")
    print("| items | operation | tree | sessionstore ms/msg | raw asyncpg ms/msg | / raw |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        runs: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in trees}
        for round_ in range(args.repeat):
            order = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
            for name in order:
                print(f"  [{size}] round {round_ + 1}/{args.repeat}: {name}", file=sys.stderr)
                runs[name].append(_run(trees[name], args, size))
        for op in OPERATIONS:
            for name in trees:
                ours = [run[op]["sessionstore"] for run in runs[name]]
                raw = [run[op]["asyncpg"] for run in runs[name]]
                ratio = statistics.median(a / b for a, b in zip(ours, raw, strict=True))
                print(
                    f"| {size} | {op} | {name} | {statistics.median(ours):.3f} | "
                    f"{statistics.median(raw):.3f} | {ratio:.2f}x |"
                )


if __name__ == "__main__":
    main()
