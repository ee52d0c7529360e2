"""Benchmark compacting one long loop with `DefaultBlockCompaction`, against appending it.

Run from a checkout, with the package installed:

    python bench/bench_compaction.py [--sizes 2500,5000,10000,20000] [--repeat 3]
                                     [--batch 500] [--url POSTGRES_URL] [--json]

For each size N, one synthetic coding-agent loop of N messages is built before each run
(`sessionstore._demo`: one loop, cut at N messages) and freed after its append. In
each run, for each size, a new session gets the loop and the script measures:

1. `append`: `append_messages` of the N messages in batches of `--batch` (default 500);
2. `compaction`: `compact_session_loops(store, session_id, strategy=
   DefaultBlockCompaction(), config=CompactionConfig(compaction_scope=FixedCount(0)))`,
   which reads the whole loop, builds its three-section block and writes it.

Then, outside those timings, the three parts of a compaction are timed one by one on
the same loop: `read` (`get_loop_view` of the loop: its messages as columns, each
built when the strategy indexes it), `strategy` (`DefaultBlockCompaction().compact(view,
config, True)`, pure) and `write`
(`write_blocks` of that block). Every figure is the median of `--repeat` runs, after a
warm-up. The goals: compaction grows linearly with the loop (its cost per message stays
flat from the smallest size to the largest) and costs at most 3x the append of the
same messages. SQLite runs on a temporary file; with `--url`, a PostgreSQL server, a
temporary `sessionstore_bench_<random>` database is created beside the URL's database
and dropped at the end. Timings on a shared machine are noisy: compare ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import fmt, log, machine_info, parse_sizes, postgres_database

from sessionstore import (
    CompactionConfig,
    DefaultBlockCompaction,
    FixedCount,
    Message,
    SessionStore,
    compact_session_loops,
    migrate,
)
from sessionstore._demo import iter_session_messages
from sessionstore.store._engine import normalize_url

DEFAULT_SIZES = (2_500, 5_000, 10_000, 20_000)
APPEND_GOAL = 3.0
"""The issue's goal: compaction / append of the same messages at most this."""
LINEAR_GOAL = 1.25
"""Read as linear: ms per message at the largest size / at the smallest at most this."""
CONFIG = CompactionConfig(compaction_scope=FixedCount(0))
PARTS = ("read", "strategy", "write")


def synthetic_loop(size: int, seed: int) -> list[Message]:
    """Return one synthetic loop of exactly `size` messages."""
    # With as many turns as messages, the first loop always runs past `size` and is cut.
    loops = iter_session_messages(seed=seed, total_messages=size, turns_per_loop=size)
    loop = next(loops)
    if len(loop) != size:
        raise RuntimeError(f"the synthetic loop has {len(loop)} messages, expected {size}")
    return loop


async def timed(work: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    """Return the milliseconds `work` takes and its result, after a garbage collection."""
    gc.collect()
    start = time.perf_counter()
    result = await work()
    return (time.perf_counter() - start) * 1000, result


@dataclass
class SizeResult:
    """The runs of one size, in ms."""

    size: int
    runs: dict[str, list[float]] = field(default_factory=dict)
    block: dict[str, Any] = field(default_factory=dict)

    def median(self, name: str) -> float:
        return statistics.median(self.runs[name])


async def one_run(
    store: SessionStore, size: int, args: argparse.Namespace, tag: str
) -> tuple[dict[str, float], dict[str, Any]]:
    """Append and compact one loop in a new session; then time the compaction's parts.

    The loop's messages are built before the append and freed after it, so the
    compaction runs on a heap of the usual size: the cyclic garbage collector's passes
    cost in proportion to everything else alive.
    """
    messages: list[Message] | None = synthetic_loop(size, args.seed)
    session = await store.create_session(app_name="bench", user_id=tag)
    sid = session.id

    async def append() -> None:
        assert messages is not None
        for start in range(0, size, args.batch):
            await store.append_messages(sid, messages[start : start + args.batch])

    times: dict[str, float] = {}
    times["append"], _ = await timed(append)
    messages = None
    times["compaction"], result = await timed(
        lambda: compact_session_loops(store, sid, strategy=DefaultBlockCompaction(), config=CONFIG)
    )
    (block,) = result.blocks
    loop_id = block.loop_id
    assert loop_id is not None
    loop = await store.get_loop(sid, loop_id)
    # What the compaction reads: the loop as columns (messages built when indexed).
    times["read"], view = await timed(lambda: store.get_loop_view(sid, loop))
    if len(view.messages) != size:
        raise RuntimeError(f"read {len(view.messages)} messages, expected {size}")
    strategy = DefaultBlockCompaction()

    async def build() -> Any:
        return strategy.compact(view, CONFIG, True)

    times["strategy"], built = await timed(build)
    times["write"], _ = await timed(lambda: store.write_blocks(sid, [(loop_id, built)]))
    shape = {
        "turns": loop.turn_count,
        "raw_tokens": block.tokens_before,
        "block_tokens": block.tokens_after,
        "replacements": sum(len(section.messages) for _, section in block.sections()),
    }
    await store.delete_session(sid)
    return times, shape


async def measure(name: str, store: SessionStore, args: argparse.Namespace) -> list[SizeResult]:
    """Run every size `--repeat` times, interleaved run by run, after a warm-up."""
    log(f"  [{name}] warming up")
    await one_run(store, 500, args, "warmup")
    names = ("append", "compaction", *PARTS)
    results = {size: SizeResult(size, {n: [] for n in names}) for size in args.sizes}
    for rep in range(args.repeat):
        log(f"  [{name}] run {rep + 1}/{args.repeat}")
        for size in args.sizes:
            times, shape = await one_run(store, size, args, f"run-{rep}-{size}")
            for key, value in times.items():
                results[size].runs[key].append(value)
            results[size].block = shape
    return list(results.values())


async def run_backend(args: argparse.Namespace) -> dict[str, Any]:
    if args.url is not None:
        async with postgres_database(normalize_url(args.url)) as (url, version):
            store = SessionStore.from_url(url)
            try:
                results = await measure("postgres", store, args)
            finally:
                await store.close()
        return report("postgres", f"PostgreSQL {version}", results)
    directory = Path(tempfile.mkdtemp(prefix="sessionstore_compaction_"))
    url = normalize_url(f"sqlite+aiosqlite:///{directory / 'bench.db'}")
    try:
        await migrate.upgrade(url)
        store = SessionStore.from_url(url)
        try:
            results = await measure("sqlite", store, args)
        finally:
            await store.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return report("sqlite", f"SQLite {sqlite3.sqlite_version} (file, WAL)", results)


def report(backend: str, title: str, results: Sequence[SizeResult]) -> dict[str, Any]:
    sizes: list[dict[str, Any]] = []
    for r in results:
        medians = {name: r.median(name) for name in r.runs}
        sizes.append(
            {
                "size": r.size,
                "block": r.block,
                "ms": {name: {"median": medians[name], "runs": r.runs[name]} for name in r.runs},
                "compaction_over_append": medians["compaction"] / medians["append"],
                "compaction_us_per_message": medians["compaction"] * 1000 / r.size,
                "append_us_per_message": medians["append"] * 1000 / r.size,
                "append_goal_met": medians["compaction"] / medians["append"] <= APPEND_GOAL,
            }
        )
    out: dict[str, Any] = {"backend": backend, "title": title, "sizes": sizes}
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        per_message = last["compaction_us_per_message"] / first["compaction_us_per_message"]
        growth = last["ms"]["compaction"]["median"] / first["ms"]["compaction"]["median"]
        out["linearity"] = {
            "from": first["size"],
            "to": last["size"],
            "time_ratio": growth,
            "size_ratio": last["size"] / first["size"],
            "exponent": math.log(growth) / math.log(last["size"] / first["size"]),
            "per_message_ratio": per_message,
            "goal": LINEAR_GOAL,
            "met": per_message <= LINEAR_GOAL,
        }
    return out


# ── output ──────────────────────────────────────────────────────────────────────


def render(result: dict[str, Any], repeat: int, batch: int) -> str:
    lines = [
        f"{result['title']}: medians of {repeat} runs, ms; compaction = compact_session_loops"
        "(DefaultBlockCompaction, FixedCount(0)); append = append_messages in batches of "
        f"{batch}"
    ]
    header = [
        "loop msgs",
        "turns",
        "append",
        "compaction",
        "(read",
        "strategy",
        "write)",
        "compaction / append",
        "us/msg compaction",
        "us/msg append",
    ]
    rows = [header]
    for s in result["sizes"]:
        ms = s["ms"]
        rows.append(
            [
                f"{s['size']:,}",
                f"{s['block']['turns']:,}",
                fmt(ms["append"]["median"]),
                fmt(ms["compaction"]["median"]),
                fmt(ms["read"]["median"]),
                fmt(ms["strategy"]["median"]),
                fmt(ms["write"]["median"]),
                f"{s['compaction_over_append']:.2f}x",
                f"{s['compaction_us_per_message']:.1f}",
                f"{s['append_us_per_message']:.1f}",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for n, row in enumerate(rows):
        cells = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    worst = max(s["compaction_over_append"] for s in result["sizes"])
    verdict = "met" if worst <= APPEND_GOAL else "NOT met"
    lines.append(f"compaction / append: at most {worst:.2f}x (goal <= {APPEND_GOAL}x: {verdict})")
    linear = result.get("linearity")
    if linear is not None:
        verdict = "met" if linear["met"] else "NOT met"
        lines.append(
            f"compaction {linear['to']:,} / {linear['from']:,}: {linear['time_ratio']:.1f}x "
            f"for {linear['size_ratio']:.0f}x the messages (exponent {linear['exponent']:.2f}); "
            f"per message {linear['per_message_ratio']:.2f}x (linear, goal <= "
            f"{linear['goal']}x: {verdict})"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=list(DEFAULT_SIZES),
        help="messages in the loop, comma-separated (default: 2500,5000,10000,20000)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs (default: %(default)s)")
    parser.add_argument(
        "--batch", type=int, default=500, help="messages per append call (default: %(default)s)"
    )
    parser.add_argument(
        "--url",
        help="a PostgreSQL URL: measure there instead of SQLite, in a temporary database "
        "created beside the URL's database and dropped at the end",
    )
    parser.add_argument("--seed", type=int, default=0, help="synthetic session seed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    for name in ("repeat", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.url is not None and normalize_url(args.url).get_backend_name() != "postgresql":
        parser.error("--url must be a PostgreSQL URL (SQLite runs on a temporary file)")
    return args


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    # Treat SIGTERM like Ctrl-C: cancel, so the temporary database is still removed.
    task = asyncio.current_task()
    if task is not None and hasattr(signal, "SIGTERM"):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    started = time.perf_counter()
    log(f"{'postgres' if args.url else 'sqlite'}: measuring")
    backend = await run_backend(args)
    return {
        "config": {
            "sizes": args.sizes,
            "repeat": args.repeat,
            "batch": args.batch,
            "seed": args.seed,
            "compaction_config": CONFIG.snapshot(),
        },
        "machine": machine_info(),
        "backend": backend,
        "elapsed_s": time.perf_counter() - started,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = asyncio.run(main_async(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        log("interrupted (temporary database removed)")
        return 130
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    m = results["machine"]
    print(
        f"sessionstore ({m['revision'] or 'no git checkout'}) | Python {m['python']} | "
        f"SQLite {m['sqlite']} | SQLAlchemy {m['sqlalchemy']} | {m['cpus']} CPUs | "
        f"{m['platform']}"
    )
    print(
        f"one synthetic loop per size (seed {args.seed}); the block: keep_first_turns="
        f"{CONFIG.keep_first_turns}, keep_recent_turns={CONFIG.keep_recent_turns}, "
        f"max_summary_tokens={CONFIG.max_summary_tokens}"
    )
    print()
    print(render(results["backend"], args.repeat, args.batch))
    print(f"({results['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
