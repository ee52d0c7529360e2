"""Measure the peak memory of reading and exporting a long history in chunks.

Run from a checkout, with the package installed:

    python bench/bench_export_memory.py [--size 1000000] [--chunk-size 1000]
                                        [--data-dir DIR] [--whole] [--json]

A synthetic coding-agent session (`sessionstore._demo`, loops of 45 to 154 messages,
about 2 KB of JSON a message) of `--size` raw messages is written to a SQLite file with
`append_messages` (one loop at a time, in batches of 500). With `--data-dir`, the file is
kept there (`export-<size>.db`) and reused by later runs. Then each way of reading the
whole history runs in a fresh Python process, which reports its peak resident memory
(`ru_maxrss`) and its memory before the read (the interpreter, the package and an open
store):

- `iter_history`: `async for chunk in store.iter_history(session_id)`, touching each
  message's content (which decodes it);
- `export`: `stream_conversation(store, session_id)` written to a file, as
  `sessionstore export` does;
- `get_history` (only with `--whole`): the whole history in one list, touching each
  message (the read `iter_history` replaces for long histories; it needs memory in
  proportion to the history).

The goal of issue 9: a full read or export of 1,000,000 messages in under 300 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import log, machine_info

from sessionstore import SessionStore, migrate, stream_conversation
from sessionstore._demo import iter_session_messages

SESSION_ID = "export-memory"
TURNS_PER_LOOP = (20, 60)
APPEND_BATCH = 500
GOAL_MB = 300
MODES = ("iter_history", "export", "get_history")


def _rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def populate(url: str, size: int, seed: int) -> None:
    await migrate.upgrade(url)
    async with SessionStore.from_url(url) as store:
        await store.create_session(session_id=SESSION_ID, app_name="bench", user_id="export")
        done, started, last = 0, time.perf_counter(), 0.0
        loops = iter_session_messages(seed=seed, total_messages=size, turns_per_loop=TURNS_PER_LOOP)
        for messages in loops:
            loop = await store.start_loop(SESSION_ID)
            for start in range(0, len(messages), APPEND_BATCH):
                batch = messages[start : start + APPEND_BATCH]
                await store.append_messages(SESSION_ID, batch, loop_id=loop.id)
            done += len(messages)
            if time.perf_counter() - last > 10:
                last = time.perf_counter()
                log(f"  populating: {done:,}/{size:,} messages, {last - started:.0f} s")


async def child(mode: str, url: str, chunk_size: int, out_dir: str) -> dict[str, Any]:
    """Read the whole history one way; return the count, the time and the memory."""
    async with SessionStore.from_url(url) as store:
        await store.get_session(SESSION_ID)
        before = _rss_mb()
        started = time.perf_counter()
        count = 0
        if mode == "iter_history":
            async for chunk in store.iter_history(SESSION_ID, chunk_size=chunk_size):
                count += sum(1 for stored in chunk if stored.message.kind)
        elif mode == "export":
            path = Path(out_dir) / "export.json"
            with path.open("w", encoding="utf-8") as out:
                async for text in stream_conversation(store, SESSION_ID, chunk_size=chunk_size):
                    out.write(text)
            # The count the file holds (read from the loops' counters, not from the file:
            # parsing it back would take the memory the stream saves).
            count = sum(loop.message_count for loop in await store.list_loops(SESSION_ID))
            path.unlink()
        else:
            history = await store.get_history(SESSION_ID)
            count = sum(1 for stored in history if stored.message.kind)
        seconds = time.perf_counter() - started
    return {
        "mode": mode,
        "messages": count,
        "seconds": seconds,
        "rss_before_mb": before,
        "peak_rss_mb": _rss_mb(),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="raw messages")
    parser.add_argument("--chunk-size", type=int, default=1000, help="messages per chunk")
    parser.add_argument("--data-dir", help="keep (and reuse) the SQLite file here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--whole", action="store_true", help="also measure get_history")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--out-dir", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.url, args.chunk_size, args.out_dir))))
        return 0
    with tempfile.TemporaryDirectory(prefix="sessionstore_export_") as scratch:
        data_dir = Path(args.data_dir) if args.data_dir else Path(scratch)
        data_dir.mkdir(parents=True, exist_ok=True)
        db = data_dir / f"export-{args.size}.db"
        marker = data_dir / f"export-{args.size}.json"
        url = f"sqlite+aiosqlite:///{db}"
        if not (db.exists() and marker.exists()):
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            log(f"populating {db} with {args.size:,} messages")
            started = time.perf_counter()
            asyncio.run(populate(url, args.size, args.seed))
            marker.write_text(json.dumps({"size": args.size, "seed": args.seed}))
            log(f"  populated in {time.perf_counter() - started:.0f} s")
        else:
            log(f"reusing {db}")
        results = []
        for mode in MODES if args.whole else MODES[:2]:
            log(f"measuring {mode}")
            command = [
                sys.executable,
                __file__,
                "--child",
                mode,
                "--url",
                url,
                "--chunk-size",
                str(args.chunk_size),
                "--out-dir",
                scratch,
            ]
            done = subprocess.run(
                command, capture_output=True, text=True, check=True, env=dict(os.environ)
            )
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    report = {"size": args.size, "chunk_size": args.chunk_size, "machine": machine_info()}
    report["results"] = results
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    m = report["machine"]
    print(f"sessionstore ({m['revision']}) | Python {m['python']} | SQLite {m['sqlite']}")
    print(f"{args.size:,} messages, chunks of {args.chunk_size:,}; goal: peak < {GOAL_MB} MB")
    print(f"{'read':<14}{'messages':>11}{'seconds':>9}{'before MB':>11}{'peak MB':>9}  goal")
    for r in results:
        verdict = "met" if r["peak_rss_mb"] < GOAL_MB else "NOT met"
        if r["mode"] == "get_history":
            verdict = "(whole list, for comparison)"
        print(
            f"{r['mode']:<14}{r['messages']:>11,}{r['seconds']:>9.1f}"
            f"{r['rss_before_mb']:>11.0f}{r['peak_rss_mb']:>9.0f}  {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
