"""Compacting a long chain: does a compaction's cost, and its digest's size, grow with it?

A session of `--loops` loops (a request, four tool-using turns and an answer each, 10
messages) is stored through the public API in a SQLite file (or, with `--url`, a
temporary PostgreSQL database), compacted every `--every` loops with
`compact_session_loops(store, session_id, max_context_tokens=4000)`: the default block
strategy and the session digest that folds the loops leaving the scope. Each
compaction's wall time is recorded (the appends between are not timed). At each
checkpoint of `--checkpoints` loops the script prints the median of the compactions
since the previous checkpoint, the bytes of the digests' provenance stored so far
(`folded`, summed over every digest row) and the time of `get_digest` and of a resume
(`build_context` at 8,000 tokens), medians of five warm calls.

The goal: a compaction's time and the digest a compaction stores stay flat as the chain
grows; the provenance all digests store grows linearly with the loops, not with their
square.

With `--baseline DIR` (another source tree, such as an older commit's `git archive`),
the same run is made with that tree in a child process, one after the other, each on its
own file: the stored formats may differ, so each tree builds its own session.

    python bench/bench_long_chain.py --loops 3000 --checkpoints 1000,2000,3000
    git archive "$OLD_COMMIT" sessionstore migrations | tar -x -C ../old
    python bench/bench_long_chain.py --baseline ../old
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

import sqlalchemy as sa
from _common import (
    child_json,
    comma_list,
    fmt,
    log,
    machine_info,
    postgres_database,
    source_tree,
)
from bench_audit_page import _loop_messages
from sqlalchemy.ext.asyncio import create_async_engine

from sessionstore import SessionStore, build_context, compact_session_loops, migrate

ROOT = Path(__file__).resolve().parent.parent
WARM_CALLS = 5


async def _median_call(call: Any) -> float:
    await call()
    times = []
    for _ in range(WARM_CALLS):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def _provenance_bytes(url: str) -> int:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            text = "SELECT COALESCE(SUM(LENGTH(CAST(folded AS TEXT))), 0) FROM sessionstore_digests"
            return int((await conn.execute(sa.text(text))).scalar_one())
    finally:
        await engine.dispose()


async def _run(url: str, loops: int, every: int, checkpoints: list[int]) -> list[dict[str, Any]]:
    store = SessionStore.from_url(url)
    figures: list[dict[str, Any]] = []
    try:
        session = await store.create_session(app_name="bench", user_id="long-chain")
        since: list[float] = []
        for number in range(1, loops + 1):
            await store.append_messages(session.id, _loop_messages(number), loop_id="new")
            if number % every == 0:
                start = time.perf_counter()
                await compact_session_loops(store, session.id, max_context_tokens=4000)
                since.append(time.perf_counter() - start)
            if number in checkpoints:
                figures.append(
                    {
                        "loops": number,
                        "compaction_s": statistics.median(since) if since else 0.0,
                        "provenance_bytes": await _provenance_bytes(url),
                        "get_digest_s": await _median_call(lambda: store.get_digest(session.id)),
                        "resume_s": await _median_call(
                            lambda: build_context(store, session.id, max_context_tokens=8000)
                        ),
                    }
                )
                log(f"  {number} loops: {figures[-1]}")
                since = []
    finally:
        await store.close()
    return figures


async def _child(args: argparse.Namespace) -> list[dict[str, Any]]:
    checkpoints = sorted({*args.checkpoints, args.loops})
    if args.url:
        async with postgres_database(sa.make_url(args.url)) as (url, _):
            return await _run(
                url.render_as_string(hide_password=False), args.loops, args.every, checkpoints
            )
    with tempfile.TemporaryDirectory(prefix="sessionstore-long-chain-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'chain.db'}"
        await migrate.upgrade(url)
        return await _run(url, args.loops, args.every, checkpoints)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=3000, help="loops in the session")
    parser.add_argument("--every", type=int, default=10, help="compact every this many loops")
    parser.add_argument(
        "--checkpoints",
        type=comma_list(int, "loops"),
        default=[1000, 2000, 3000],
        help="loop counts to report at (default: 1000,2000,3000)",
    )
    parser.add_argument("--url", help="a PostgreSQL URL (a temporary database beside it)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="another source tree")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loops < 1 or args.every < 1:
        parser.error("--loops and --every must be at least 1")
    if args.child:
        print(json.dumps(asyncio.run(_child(args))))
        return
    arguments = [f"--loops={args.loops}", f"--every={args.every}"]
    arguments.append("--checkpoints=" + ",".join(map(str, args.checkpoints)))
    if args.url:
        arguments.append(f"--url={args.url}")
    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees["baseline"] = source_tree(args.baseline)
    results: dict[str, Any] = {}
    for name, tree in trees.items():
        log(f"{name}: {args.loops} loops, compacted every {args.every}")
        results[name] = child_json(__file__, tree, arguments)
    if args.json:
        print(json.dumps({"machine": machine_info(), "trees": results}, indent=2))
        return
    backend = "PostgreSQL" if args.url else "SQLite"
    print(f"Compacting a long chain ({backend}): every {args.every} loops\n")
    columns = ["compaction (ms)", "digests' provenance (MB)", "get_digest (ms)", "resume (ms)"]
    print("| tree | loops | " + " | ".join(columns) + " |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, rows in results.items():
        for row in rows:
            print(
                f"| {name} | {row['loops']:,} | {fmt(row['compaction_s'] * 1e3)} "
                f"| {fmt(row['provenance_bytes'] / 1e6)} | {fmt(row['get_digest_s'] * 1e3)} "
                f"| {fmt(row['resume_s'] * 1e3)} |"
            )


if __name__ == "__main__":
    sys.exit(main())
