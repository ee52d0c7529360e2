"""Benchmark resuming a long session: `build_context` against reading the whole history.

Run from a checkout, with the package installed:

    python bench/bench_resume.py [--sizes 10000,100000,1000000] [--quick] [--repeat 3]
                                 [--data-dir DIR] [--url POSTGRES_URL] [--json]
                                 [--full-read whole|stream|none]

For each size, a synthetic coding-agent session (`sessionstore._demo`, loops of 45
to 154 messages) of that many raw messages is written and compacted as an agent would
have left it: every earlier loop with a whole-loop summary block, the current loop with
a three-section block. Then, as the median of `--repeat` runs after a warm-up, the
script measures:

1. `resume`: `build_context(store, session_id, max_context_tokens=32_000)` with the
   default config (`FixedCount(3)` scope), ms per build (`--builds` builds per run);
2. `full read`: `store.get_history(session_id)`, every raw message of the chain, ms
   (`--full-read stream`: `store.iter_history` in chunks of 1,000, in bounded memory;
   `--full-read none`: not timed).

All the resumes are timed first, interleaved size by size in each run; then each size's
full reads, one after another behind an untimed one (a full read of a million messages
fills memory and evicts the other databases from the OS page cache).

The loader reads only what the context holds, so `resume` should stay nearly flat as
the history grows (the goal: at most 1.5x from 10,000 to 1,000,000 messages) while the
full read grows with it. The ratios printed are resume at the largest size / resume at
the smallest, and full read / resume at each size, both within one run.

Populating: the messages go in with `append_messages`, one call per loop. The earlier
loops' blocks are built with `DefaultBlockCompaction().compact(LoopView.of(loop,
messages), config, is_most_recent=False)` and written with `store.write_blocks`, 200
loops per call (calling `compact_session_loops` after every loop would also work, but
re-reads each loop); one `compact_session_loops` at the end writes the current loop's
block. On SQLite each size is a file under `--data-dir` (`resume-<size>.db`, with a
`resume-<size>.json` manifest written once it is complete): pass the same directory
again and the population is skipped. The default is a temporary directory, removed at
the end. With `--url`, a PostgreSQL server, a temporary `sessionstore_bench_<random>`
database is created beside the URL's database, populated on every run, and dropped at
the end. Timings on a shared machine are noisy: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import secrets
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import fmt, log, machine_info, parse_sizes, postgres_database, source_revision
from sqlalchemy.engine import URL

from sessionstore import (
    CompactionBlock,
    CompactionConfig,
    DefaultBlockCompaction,
    LoopRecord,
    LoopView,
    Message,
    SessionStore,
    StoredMessage,
    build_context,
    compact_session_loops,
    migrate,
)
from sessionstore._demo import iter_session_messages
from sessionstore.store._engine import normalize_url

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000, 100_000)
MAX_CONTEXT_TOKENS = 32_000
TURNS_PER_LOOP = (20, 60)
"""Tool-using turns per synthetic loop: 45 to 154 messages a loop, 87 on average."""
APPEND_BATCH = 500
"""The most messages per `append_messages` call (a loop is written in one call)."""
BLOCK_BATCH = 200
"""Earlier loops' blocks per `write_blocks` call while populating."""
FLAT_GOAL = 1.5
"""The issue's goal: resume at 1,000,000 messages / resume at 10,000 at most this."""
CACHE_FORMAT = 1
"""Bump when the population changes, so cached databases are rebuilt."""
PROGRESS_EVERY_S = 10.0


# ── population ──────────────────────────────────────────────────────────────────


class Progress:
    """Population progress on stderr: one line every `PROGRESS_EVERY_S` seconds."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.total = total
        self.started = time.perf_counter()
        self._last = self.started

    def update(self, done: int, loops: int, *, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last < PROGRESS_EVERY_S:
            return
        self._last = now
        elapsed = now - self.started
        rate = done / elapsed if elapsed else 0.0
        eta = (self.total - done) / rate if rate else 0.0
        log(
            f"  [{self.label}] {done:,}/{self.total:,} messages ({100 * done / self.total:.0f}%), "
            f"{loops:,} loops, {elapsed:.0f} s, {rate:,.0f} msg/s, ~{eta:.0f} s left"
        )


@dataclass
class Population:
    """What was written for one size, and how long each part took."""

    size: int
    session_id: str
    seed: int
    loops: int = 0
    raw_tokens: int = 0
    seconds: float = 0.0
    generate_s: float = 0.0
    append_s: float = 0.0
    blocks_s: float = 0.0
    """Building the earlier loops' blocks with the strategy (pure)."""
    write_blocks_s: float = 0.0
    final_compaction_s: float = 0.0
    reused: bool = False


def _timed_iter(items: Iterator[list[Message]], spent: list[float]) -> Iterator[list[Message]]:
    """Yield from `items`, adding the time spent producing each item to `spent[0]`."""
    while True:
        start = time.perf_counter()
        try:
            item = next(items)
        except StopIteration:
            return
        finally:
            spent[0] += time.perf_counter() - start
        yield item


def _closed_record(loop: LoopRecord, stored: Sequence[StoredMessage]) -> LoopRecord:
    """Return `loop` (as `start_loop` returned it) with the counters its messages gave it."""
    return loop.model_copy(
        update={
            "message_count": len(stored),
            "token_total": sum(m.token_count for m in stored),
            "turn_count": stored[-1].turn_index + 1 if stored else 0,
        }
    )


async def populate(
    store: SessionStore, session_id: str, size: int, seed: int, label: str
) -> Population:
    """Write a compacted synthetic session of `size` messages, as an agent would leave it."""
    result = Population(size=size, session_id=session_id, seed=seed)
    config = CompactionConfig()
    strategy = DefaultBlockCompaction()
    progress = Progress(label, size)
    started = time.perf_counter()
    await store.create_session(session_id=session_id, app_name="bench", user_id="resume")
    generate = [0.0]
    pending: list[tuple[int, CompactionBlock]] = []
    previous: tuple[LoopRecord, list[StoredMessage]] | None = None
    done = 0

    async def flush() -> None:
        clock = time.perf_counter()
        await store.write_blocks(session_id, pending)
        result.write_blocks_s += time.perf_counter() - clock
        pending.clear()

    loops = iter_session_messages(seed=seed, total_messages=size, turns_per_loop=TURNS_PER_LOOP)
    for messages in _timed_iter(loops, generate):
        clock = time.perf_counter()
        loop = await store.start_loop(session_id)  # closes the previous loop
        stored: list[StoredMessage] = []
        for start in range(0, len(messages), APPEND_BATCH):
            batch = messages[start : start + APPEND_BATCH]
            stored += await store.append_messages(session_id, batch, loop_id=loop.id)
        result.append_s += time.perf_counter() - clock
        if previous is not None:
            clock = time.perf_counter()
            record, previous_messages = previous
            view = LoopView.of(_closed_record(record, previous_messages), previous_messages)
            pending.append((record.id, strategy.compact(view, config, is_most_recent=False)))
            result.blocks_s += time.perf_counter() - clock
            if len(pending) >= BLOCK_BATCH:
                await flush()
        previous = (loop, stored)
        result.loops += 1
        result.raw_tokens += sum(m.token_count for m in stored)
        done += len(stored)
        if done > size:
            raise RuntimeError(f"the synthetic session ran past {size:,} messages")
        progress.update(done, result.loops)
    if pending:
        await flush()
    clock = time.perf_counter()
    # The current loop's three-section block; the earlier loops in scope already hold a
    # whole-loop summary built with the same strategy and config, so they are skipped.
    compacted = await compact_session_loops(store, session_id, config=config)
    result.final_compaction_s = time.perf_counter() - clock
    result.generate_s = generate[0]
    result.seconds = time.perf_counter() - started
    progress.update(done, result.loops, force=True)
    if done != size or len(compacted.blocks) != 1:
        raise RuntimeError(
            f"populated {done} messages (expected {size}) and wrote "
            f"{len(compacted.blocks)} blocks at the end (expected 1)"
        )
    return result


# ── backends: where the sessions live ───────────────────────────────────────────


@dataclass
class Dataset:
    """One populated session, with the store that reads it."""

    population: Population
    store: SessionStore


def _sqlite_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _remove_sqlite(path: Path) -> None:
    for file in _sqlite_files(path):
        file.unlink(missing_ok=True)


def _manifest_matches(manifest: dict[str, Any], size: int, seed: int) -> bool:
    return (
        manifest.get("format") == CACHE_FORMAT
        and manifest.get("size") == size
        and manifest.get("seed") == seed
        and manifest.get("turns_per_loop") == list(TURNS_PER_LOOP)
    )


async def open_sqlite(data_dir: Path, size: int, seed: int) -> Dataset:
    """Open the cached database of `size` messages, populating it first if needed."""
    final = data_dir / f"resume-{size}.db"
    manifest_path = data_dir / f"resume-{size}.json"
    if final.exists() and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if _manifest_matches(manifest, size, seed):
            population = Population(**manifest["population"])
            population.reused = True
            url = normalize_url(f"sqlite+aiosqlite:///{final}")
            await migrate.upgrade(url)  # a no-op unless the schema moved on since
            log(f"  [sqlite {size:,}] reusing {final} (populated in {population.seconds:.0f} s)")
            return Dataset(population, SessionStore.from_url(url))
        log(f"  [sqlite {size:,}] {final} was built differently: rebuilding it")
    manifest_path.unlink(missing_ok=True)
    _remove_sqlite(final)
    partial = data_dir / f"resume-{size}.partial.db"
    _remove_sqlite(partial)
    url = normalize_url(f"sqlite+aiosqlite:///{partial}")
    await migrate.upgrade(url)
    store = SessionStore.from_url(url)
    log(f"  [sqlite {size:,}] populating {partial}")
    try:
        population = await populate(store, f"resume-{size}", size, seed, f"sqlite {size:,}")
    finally:
        await store.close()
    # Closing the last connection checkpoints the WAL, so the file alone holds everything.
    for source, target in zip(_sqlite_files(partial), _sqlite_files(final), strict=True):
        if source.exists():
            source.replace(target)
    manifest = {
        "format": CACHE_FORMAT,
        "size": size,
        "seed": seed,
        "turns_per_loop": list(TURNS_PER_LOOP),
        "revision": source_revision(),
        "created_at": datetime.now(UTC).isoformat(),
        "population": asdict(population),
    }
    manifest_path.write_text(json.dumps(manifest, indent=2))
    log(f"  [sqlite {size:,}] populated in {population.seconds:.0f} s")
    return Dataset(population, SessionStore.from_url(normalize_url(f"sqlite+aiosqlite:///{final}")))


# ── measuring ───────────────────────────────────────────────────────────────────


async def timed(work: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    """Return the seconds `work` takes and its result, after a garbage collection."""
    gc.collect()
    start = time.perf_counter()
    result = await work()
    return time.perf_counter() - start, result


@dataclass
class SizeResult:
    """The runs of one size: ms per resume and per full read."""

    population: Population
    resume_ms: list[float] = field(default_factory=list)
    history_ms: list[float] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)


async def resume(store: SessionStore, session_id: str) -> Any:
    return await build_context(store, session_id, max_context_tokens=MAX_CONTEXT_TOKENS)


async def measure(
    name: str, datasets: Sequence[Dataset], args: argparse.Namespace
) -> list[SizeResult]:
    """Time resume for every size, interleaved run by run; then the full reads, size by size.

    All the resumes are timed before the first full read, and each size's full reads
    run one after another behind an untimed one: a full read of a million messages
    holds about 12 GB, which pushes the other databases out of the OS page cache, so
    a read or resume right after it would read from disk. Each timed batch of resumes
    starts after one untimed build.
    """
    results = [SizeResult(d.population) for d in datasets]
    log(f"  [{name}] warming up ({args.builds} builds of each size)")
    for dataset, result in zip(datasets, results, strict=True):
        sid = dataset.population.session_id
        for _ in range(args.builds):
            built = await resume(dataset.store, sid)
        session = await dataset.store.get_session(sid)
        result.context = {
            "messages": len(built.items),
            "tokens": built.tokens,
            "loaded_tokens": built.loaded_tokens,
            "loops": len(built.loop_ids),
            "trimmed_messages": built.trimmed_messages,
            "loop_count": session.loop_count,
        }
        if built.tokens > MAX_CONTEXT_TOKENS:
            raise RuntimeError(f"the context holds {built.tokens} tokens, over the budget")
    for rep in range(args.repeat):
        log(f"  [{name}] run {rep + 1}/{args.repeat}: resume")
        for dataset, result in zip(datasets, results, strict=True):
            store, sid = dataset.store, dataset.population.session_id
            await resume(store, sid)

            async def builds(store: SessionStore = store, sid: str = sid) -> None:
                for _ in range(args.builds):
                    await resume(store, sid)

            seconds, _ = await timed(builds)
            result.resume_ms.append(seconds * 1000 / args.builds)
    if args.full_read == "none":
        return results
    for dataset, result in zip(datasets, results, strict=True):
        store, sid = dataset.store, dataset.population.session_id
        log(f"  [{name}] full reads of {dataset.population.size:,} messages ({args.full_read})")

        async def read_all(store: SessionStore = store, sid: str = sid) -> int:
            if args.full_read == "stream":
                count = 0
                async for chunk in store.iter_history(sid):
                    count += len(chunk)
                return count
            return len(await store.get_history(sid))

        for rep in range(args.repeat + 1):  # the first is the warm-up
            seconds, count = await timed(read_all)
            if count != dataset.population.size:
                raise RuntimeError(f"read {count} messages, expected {dataset.population.size}")
            if rep:
                result.history_ms.append(seconds * 1000)
    return results


async def run_sqlite(args: argparse.Namespace) -> dict[str, Any]:
    if args.data_dir is None:
        data_dir = Path(tempfile.mkdtemp(prefix="sessionstore_resume_"))
        keep = False
    else:
        data_dir = Path(args.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        keep = True
    datasets: list[Dataset] = []
    try:
        for size in args.sizes:
            datasets.append(await open_sqlite(data_dir, size, args.seed))
        results = await measure("sqlite", datasets, args)
    finally:
        for dataset in datasets:
            await dataset.store.close()
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    title = f"SQLite {sqlite3.sqlite_version} (file, WAL)"
    return report("sqlite", title, results, data_dir=str(data_dir) if keep else None)


async def run_postgres(admin_url: URL, args: argparse.Namespace) -> dict[str, Any]:
    async with postgres_database(admin_url) as (url, version):
        store = SessionStore.from_url(url)
        try:
            datasets = []
            for size in args.sizes:
                sid = f"bench-resume-{secrets.token_hex(4)}-{size}"
                log(f"  [postgres {size:,}] populating session {sid}")
                population = await populate(store, sid, size, args.seed, f"postgres {size:,}")
                log(f"  [postgres {size:,}] populated in {population.seconds:.0f} s")
                datasets.append(Dataset(population, store))
            results = await measure("postgres", datasets, args)
        finally:
            await store.close()
    return report("postgres", f"PostgreSQL {version}", results, data_dir=None)


def report(
    backend: str, title: str, results: Sequence[SizeResult], *, data_dir: str | None
) -> dict[str, Any]:
    sizes: list[dict[str, Any]] = []
    for r in results:
        resume_ms = statistics.median(r.resume_ms)
        history_ms = statistics.median(r.history_ms) if r.history_ms else math.nan
        sizes.append(
            {
                "size": r.population.size,
                "population": asdict(r.population),
                "context": r.context,
                "resume_ms": {"median": resume_ms, "runs": r.resume_ms},
                "history_ms": {"median": history_ms, "runs": r.history_ms},
                "history_over_resume": history_ms / resume_ms,
            }
        )
    out: dict[str, Any] = {"backend": backend, "title": title, "sizes": sizes}
    if data_dir is not None:
        out["data_dir"] = data_dir
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        growth = last["resume_ms"]["median"] / first["resume_ms"]["median"]
        out["resume_growth"] = {
            "from": first["size"],
            "to": last["size"],
            "ratio": growth,
            "goal": FLAT_GOAL,
            "met": growth <= FLAT_GOAL,
        }
        out["history_growth"] = last["history_ms"]["median"] / first["history_ms"]["median"]
    return out


# ── output ──────────────────────────────────────────────────────────────────────


def _or_dash(value: float, show: Callable[[float], str]) -> str:
    """`show(value)`, or "-" for a figure not measured (NaN: `--full-read none`)."""
    return "-" if math.isnan(value) else show(value)


def table(rows: list[list[str]], left: int = 1) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            cell.ljust(w) if i < left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def render(result: dict[str, Any], repeat: int) -> str:
    lines = [
        f"{result['title']}: medians of {repeat} runs; resume = build_context("
        f"max_context_tokens={MAX_CONTEXT_TOKENS:,}), default config (FixedCount(3))"
    ]
    rows = [
        [
            "raw messages",
            "loops",
            "raw tokens",
            "context loops",
            "context msgs",
            "context tokens",
            "resume ms",
            "full read ms",
            "full read / resume",
        ]
    ]
    for s in result["sizes"]:
        p, c = s["population"], s["context"]
        rows.append(
            [
                f"{s['size']:,}",
                f"{p['loops']:,}",
                f"{p['raw_tokens']:,}",
                f"{c['loops']}",
                f"{c['messages']:,}",
                f"{c['tokens']:,}",
                fmt(s["resume_ms"]["median"]),
                _or_dash(s["history_ms"]["median"], fmt),
                _or_dash(s["history_over_resume"], lambda ratio: f"{ratio:,.0f}x"),
            ]
        )
    lines += table(rows)
    growth = result.get("resume_growth")
    if growth is not None:
        verdict = "met" if growth["met"] else "NOT met"
        line = (
            f"resume {growth['to']:,} / {growth['from']:,}: {growth['ratio']:.2f}x "
            f"(goal <= {growth['goal']}x: {verdict})"
        )
        if not math.isnan(result["history_growth"]):  # not with --full-read none
            line += f"; full read {growth['to']:,} / {growth['from']:,}: "
            line += f"{result['history_growth']:.0f}x"
        lines.append(line)
    lines.append("population (s): total = generate + append + build blocks + write blocks + final")
    for s in result["sizes"]:
        p = s["population"]
        reused = " (cached: from an earlier run)" if p["reused"] else ""
        lines.append(
            f"  {s['size']:>9,}: {p['seconds']:.0f} = {p['generate_s']:.0f} + "
            f"{p['append_s']:.0f} + {p['blocks_s']:.0f} + {p['write_blocks_s']:.0f} + "
            f"{p['final_compaction_s']:.1f}{reused}"
        )
    if "data_dir" in result:
        lines.append(f"databases kept in {result['data_dir']} (pass it again to skip population)")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=list(DEFAULT_SIZES),
        help="raw messages per session, comma-separated (default: 10000,100000,1000000)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="only 10,000 and 100,000 messages (overrides --sizes)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs (default: %(default)s)")
    parser.add_argument(
        "--builds", type=int, default=10, help="resumes per run and size (default: %(default)s)"
    )
    parser.add_argument(
        "--data-dir",
        help="where the SQLite databases are kept and reused (default: a temporary "
        "directory, removed at the end)",
    )
    parser.add_argument(
        "--url",
        help="a PostgreSQL URL: measure there instead of SQLite, in a temporary database "
        "created beside the URL's database and dropped at the end",
    )
    parser.add_argument(
        "--full-read",
        choices=("whole", "stream", "none"),
        default="whole",
        help="how the full read is timed: get_history (whole, the default), iter_history "
        "in chunks of 1,000 (stream: bounded memory), or not at all (none)",
    )
    parser.add_argument("--seed", type=int, default=0, help="synthetic session seed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = list(QUICK_SIZES)
    for name in ("repeat", "builds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.url is not None and normalize_url(args.url).get_backend_name() != "postgresql":
        parser.error("--url must be a PostgreSQL URL (SQLite runs on files under --data-dir)")
    return args


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    # Treat SIGTERM like Ctrl-C: cancel, so temporary databases are still removed.
    task = asyncio.current_task()
    if task is not None and hasattr(signal, "SIGTERM"):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    results: dict[str, Any] = {
        "config": {
            "sizes": args.sizes,
            "repeat": args.repeat,
            "builds": args.builds,
            "max_context_tokens": MAX_CONTEXT_TOKENS,
            "turns_per_loop": list(TURNS_PER_LOOP),
            "seed": args.seed,
        },
        "machine": machine_info(),
    }
    started = time.perf_counter()
    if args.url is None:
        log("sqlite: preparing and measuring")
        results["backend"] = await run_sqlite(args)
    else:
        log("postgres: preparing and measuring")
        results["backend"] = await run_postgres(normalize_url(args.url), args)
    results["elapsed_s"] = time.perf_counter() - started
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = asyncio.run(main_async(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        log("interrupted (temporary databases removed)")
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
        f"synthetic sessions (seed {args.seed}), loops of {TURNS_PER_LOOP[0]}-"
        f"{TURNS_PER_LOOP[1]} tool-using turns; earlier loops hold whole-loop summary "
        "blocks (built with DefaultBlockCompaction, written with write_blocks), the "
        "current loop a three-section block (compact_session_loops)"
    )
    print()
    print(render(results["backend"], args.repeat))
    print(f"({results['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
