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

Raw asyncpg's table (`bench_store.AsyncpgImpl`) is not the store's: eight columns, two
indexes, no search vector, no foreign key, no session or loop row to update. So each child
also times, in the same alternation, two like-for-like references on the store's own
tables (stop 27): `same rows`, raw asyncpg writing exactly the rows the store just wrote
(every column, the search vector literal, the hash; `executemany` in a transaction) into
`sessionstore_messages`, in a session and loop of their own; and `same writes`, those rows
plus the store's session version bump and loop counters in the same transaction (the
writes an append that keeps the store's rules makes, as three statements more). Their
values are taken from the store's own preparation of the same messages (`_pg_append`'s
parameters), outside the timing, so both are lower bounds of what such an append costs.
The goal's ratio stays the one to raw asyncpg.

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
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve().parent
OPERATIONS = ("append_one", "append_batch")
SAME = ("same_rows", "same_writes")
"""The like-for-like references: the store's rows, and its rows, lock and counters."""

_SAME_INSERT = (
    "INSERT INTO sessionstore_messages (session_id, app_name, user_id, loop_id, position, "
    "turn_index, kind, tool_call_id, tool_name, payload, token_count, content_hash, client_id, "
    "created_at, search_vector) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, "
    "$12, $13, $14, $15::tsvector)"
)
_SAME_LOCK = (
    "UPDATE sessionstore_sessions SET version = version + 1, updated_at = $4 "
    "WHERE id = $1 AND app_name = $2 AND user_id = $3 RETURNING version"
)
_SAME_COUNT = (
    "UPDATE sessionstore_loops SET message_count = message_count + $5, "
    "token_total = token_total + $6, turn_count = $7, open_tool_call_ids = $8::jsonb "
    "WHERE id = $4 AND session_id = $1 AND app_name = $2 AND user_id = $3"
)


class _SameWrites:
    """Raw asyncpg writing the rows the store last wrote, into the store's own tables.

    `_pg_append._values` is wrapped to keep the parameters of the store's last append (its
    rows' values, built by the store); `write` inserts those rows again, at positions of a
    loop of its own far past the store's, with `executemany` in one transaction, and with
    `lock` also bumps that session's version and adds to that loop's counters as the store
    does. Without `_pg_append._values` (another tree's layout) `available` is False.
    """

    def __init__(self) -> None:
        self.last: dict[str, Any] | None = None
        self.available = False
        self._conn: Any = None
        self._key: tuple[Any, ...] = ()
        self._position = 10_000_000
        try:
            from sessionstore.store import _pg_append

            values = _pg_append._values
        except (ImportError, AttributeError):
            return

        def kept(*args: Any) -> Any:
            out = values(*args)
            self.last = out[0]
            return out

        setattr(_pg_append, "_values", kept)  # noqa: B010  # the store's calls go through it
        self.available = True

    async def open(self, dsn: str, store: Any, items: Any) -> None:
        """Connect, and have the store make the session and loop these writes go to."""
        import asyncpg

        self._conn = await asyncpg.connect(dsn)
        target = await store.new_loop("same")
        await store.append(target, items)
        await store.append(target, items)  # the one-statement path (its parameters kept)
        assert self.last is not None
        p = self.last
        self._key = (p["sid"], p["app"], p["user"], p["lid"])

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    def rows(self) -> list[tuple[Any, ...]]:
        p: Any = self.last
        sid, app, user, lid = self._key
        now = datetime.now(UTC)
        start, self._position = self._position, self._position + len(p["positions"])
        return [
            (sid, app, user, lid, start + j, p["turn_indexes"][j], p["kinds"][j],
             p["tool_call_ids"][j], p["tool_names"][j], p["payloads"][j], p["token_counts"][j],
             p["hashes"][j], p["client_ids"][j], now, p["vectors"][j])
            for j in range(len(p["positions"]))
        ]  # fmt: skip

    async def write(self, rows: list[tuple[Any, ...]], lock: bool) -> None:
        conn: Any = self._conn
        p: Any = self.last
        sid, app, user, lid = self._key
        async with conn.transaction():
            if lock:
                await conn.fetchval(_SAME_LOCK, sid, app, user, rows[0][13])
            if len(rows) == 1:
                await conn.execute(_SAME_INSERT, *rows[0])
            else:
                await conn.executemany(_SAME_INSERT, rows)
            if lock:
                counters = (len(rows), p["tokens"], p["turns"], p["open_ids"])
                await conn.execute(_SAME_COUNT, sid, app, user, lid, *counters)


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
        same = _SameWrites()
        for impl in impls:
            await impl.open()
        try:
            for impl in impls:  # connections and prepared statements
                warm = await impl.new_loop("warm")
                for item in many[:30]:
                    await impl.append(warm, (item,))
            if same.available:
                dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
                await same.open(dsn, impls[0], many[:1])
                for _ in range(30):
                    rows = same.rows()
                    await same.write(rows, False)
                    await same.write(same.rows(), True)
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
                    if not same.available or same.last is None:
                        continue
                    for name, lock in zip(SAME, (False, True), strict=True):
                        rows = same.rows()  # the store's values, built outside the timing
                        start = time.perf_counter()
                        await same.write(rows, lock)
                        elapsed = (time.perf_counter() - start) * 1000 / len(items)
                        times[op].setdefault(name, []).append(elapsed)
        finally:
            await same.close()
            for impl in impls:
                await impl.close()
    return {
        op: {name: statistics.median(values) for name, values in by_impl.items()}
        for op, by_impl in times.items()
    }


def _run(tree: Path, args: argparse.Namespace, size: str) -> dict[str, dict[str, float]]:
    from _common import child_json  # here: the parent imports no sessionstore tree itself

    arguments = ["--postgres-url", args.postgres_url, "--size", size]
    arguments += ["--messages", str(args.messages), "--single", str(args.single)]
    result: dict[str, dict[str, float]] = child_json(__file__, tree, arguments)
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
    print(
        "| items | operation | tree | sessionstore ms/msg | raw asyncpg ms/msg | / raw | "
        "same rows ms/msg | same writes ms/msg | / same rows | / same writes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
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
                cells = []
                refs = {ref: [run[op].get(ref, 0.0) for run in runs[name]] for ref in SAME}
                for got in refs.values():
                    cells.append(f"{statistics.median(got):.3f}" if all(got) else "-")
                for got in refs.values():
                    each = [a / b for a, b in zip(ours, got, strict=True)] if all(got) else []
                    cells.append(f"{statistics.median(each):.2f}x" if each else "-")
                print(
                    f"| {size} | {op} | {name} | {statistics.median(ours):.3f} | "
                    f"{statistics.median(raw):.3f} | {ratio:.2f}x | " + " | ".join(cells) + " |"
                )


if __name__ == "__main__":
    main()
