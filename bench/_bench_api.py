"""The Python API section of `bench_peers.py`: what a caller of `SessionStore` gets.

Every timed read returns what the caller uses: sessionstore's `get_messages` with every
`StoredMessage.message` decoded, each OpenAI Agents SDK session's `get_items()` (decoded
dicts), and the floors (stdlib sqlite3 in WAL, raw asyncpg) with `json.loads` of every
payload. Measured for small (about 225 bytes of JSON) and large (about 800 bytes) items,
at each `--api-sizes` history size, as the median of `--repeat` runs interleaved run by
run (every implementation runs once in each run before the next run starts):

- `append_one`: one message a call (`--api-single` calls), ms/message; sessionstore also
  with `synchronous=FULL` (the SDK stores' durability: WAL with SQLite's default FULL);
- `append_batch`: batches of 100 up to N, ms/message;
- `read_first`: the first full read on a freshly opened store (connections, statement
  caches and decoders cold), ms/read;
- `read_all`: a warm full read of N, ms/read; `read_last`: the newest 50, warm, ms/read;
- `bytes`: database file bytes per message (checkpointed), sessionstore vs the SDK's
  `SQLiteSession`, each alone in a fresh file with the N messages of one session.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import fmt, log, timed_turn
from bench_store import AsyncpgImpl, Impl, Item, Loop, Sqlite3Impl, StoreImpl
from sqlalchemy.engine import URL

from sessionstore import (
    AssistantMessage,
    HeuristicTokenCounter,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    migrate,
)
from sessionstore._turns import TurnAssigner
from sessionstore.models import message_payload
from sessionstore.store._engine import normalize_url

__all__ = ["add_arguments", "api_items", "render_api", "run_api"]

BATCH = 100
TAIL = 50
SIZES = {"small": 225, "large": 800}
"""Item size name -> the mean bytes of stored JSON a message aimed at."""

GOALS = {
    "append_one": 0.8,
    "append_batch": 1.0,
    "read_first": 1.0,
    "read_all": 1.0,
    "read_last": 1.0,
}
"""Issue 20's goals: sessionstore / best peer at most this (SQLite)."""
FLOOR_GOAL = 2.5
"""sessionstore / the raw sqlite3 floor at most this, on batch append and decoded read."""
BYTES_GOAL = 1.5
"""Database bytes per message / the SDK SQLite store's at most this."""
PG_GOALS = {"append_one": 1.2, "append_batch": 1.5}
"""PostgreSQL: sessionstore / raw asyncpg at most this."""

_WORDS = [
    *[
        "the",
        "parser",
        "keeps",
        "every",
        "token",
        "of",
        "the",
        "input",
        "and",
        "reports",
        "the",
        "first",
        "error",
        "with",
        "its",
    ],
    *[
        "line",
        "number",
        "so",
        "that",
        "a",
        "caller",
        "can",
        "show",
        "where",
        "the",
        "file",
        "stopped",
        "making",
        "sense",
    ],
]


def _text(n: int, k: int) -> str:
    """Return about `n` characters of words, varied by `k`."""
    words: list[str] = []
    length, i = 0, k
    while length < n:
        word = _WORDS[i % len(_WORDS)]
        words.append(word)
        length += len(word) + 1
        i += 7
    return " ".join(words)


def api_items(count: int, size: str) -> list[Item]:
    """Return `count` messages cycling user / assistant with a tool call / tool result.

    The texts are sized so the stored JSON averages about `SIZES[size]` bytes.
    """
    user, said, output = {"small": (46, 14, 30), "large": (520, 280, 1000)}[size]
    counter, turns = HeuristicTokenCounter(), TurnAssigner()
    items: list[Item] = []
    for n in range(count):
        k, step = divmod(n, 3)
        message: Message
        if step == 0:
            message = UserMessage(content=f"Step {k}: " + _text(user, k))
        elif step == 1:
            message = AssistantMessage(
                content=[
                    TextContent(text=_text(said, k)),
                    ToolCall(
                        id=f"call_{k:06d}",
                        name="bash",
                        arguments=json.dumps({"command": f"pytest tests/t{k % 37}.py -q"}),
                    ),
                ],
                model="bench-model-1",
                usage=Usage(input_tokens=1200 + k, output_tokens=48),
            )
        else:
            message = ToolResultMessage(
                tool_call_id=f"call_{k:06d}", tool_name="bash", content=_text(output, k)
            )
        items.append(
            Item(
                message=message,
                kind=message.kind,
                payload=message_payload(message),
                token_count=counter.count_message(message),
                turn_index=turns.assign(message),
            )
        )
    return items


def mean_bytes(items: Sequence[Item]) -> int:
    return round(statistics.mean(len(json.dumps(i.payload)) for i in items))


# ── implementations that return what a caller uses ───────────────────────────────


class DecodedStore(StoreImpl):
    """sessionstore's Python API, every read message decoded (`.message` used)."""

    def __init__(self, url: URL, *, synchronous: str | None = None) -> None:
        super().__init__(url)
        self._synchronous = synchronous
        if synchronous is not None:
            self.name = f"sessionstore_{synchronous}"
            self.label = f"sessionstore ({synchronous.upper()})"

    async def open(self) -> None:
        from sessionstore import SessionStore

        extra = {} if self._synchronous is None else {"synchronous": self._synchronous}
        self._store = SessionStore.from_url(self._url, **extra)

    async def read(self, loop: Loop, last: int | None = None) -> Sequence[Any]:
        stored = await self.store.get_messages(loop.session_id, loop.loop_id, last=last)
        return [s.message for s in stored]


# ── measuring ───────────────────────────────────────────────────────────────────


@dataclass
class Op:
    name: str
    label: str
    unit: str
    runs: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.runs.setdefault(name, []).append(value)

    def median(self, name: str) -> float | None:
        values = self.runs.get(name)
        return statistics.median(values) if values else None


def _chunks(items: Sequence[Item], size: int) -> list[Sequence[Item]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


async def _fill(impl: Impl, loop: Loop, items: Sequence[Item]) -> None:
    for part in _chunks(items, BATCH):
        await impl.append(loop, part)


async def measure_api(
    backend: str, impls: Sequence[Impl], size: str, n: int, args: argparse.Namespace
) -> dict[str, Op]:
    """Time every operation on every implementation, interleaved run by run.

    Each run writes a fresh history of `n` per implementation; its first full read (no
    read of that history before) is `read_first`, the reads after it are warm.
    """
    ops = {
        "append_one": Op("append_one", "append 1 message a call", "ms/msg"),
        "append_batch": Op("append_batch", f"append batches of {BATCH}", "ms/msg"),
        "read_first": Op("read_first", f"first full read of {n:,}, decoded", "ms/read"),
        "read_all": Op("read_all", f"warm full read of {n:,}, decoded", "ms/read"),
        "read_last": Op("read_last", f"newest {TAIL}, decoded", "ms/read"),
    }
    single = api_items(args.api_single, size)
    many = api_items(n, size)
    for impl in impls:
        await impl.open()
    try:
        for impl in impls:  # tables, connections, statement caches
            loop = await impl.new_loop("warmup")
            for item in many[:30]:
                await impl.append(loop, (item,))
            await impl.read(loop)
            await impl.read(loop, last=TAIL)
        for rep in range(args.repeat):
            log(f"  [api {backend} {size} {n:,}] run {rep + 1}/{args.repeat}")
            for impl in impls:
                loop = await impl.new_loop(f"one-{rep}")

                async def one(impl: Impl = impl, loop: Loop = loop) -> None:
                    for item in single:
                        await impl.append(loop, (item,))

                ops["append_one"].add(impl.name, await timed_turn(one) * 1000 / len(single))
            final: dict[str, Loop] = {}
            for impl in impls:
                if impl.name.startswith("sessionstore_"):
                    continue  # the durability variant: single appends only
                loop = await impl.new_loop(f"batch-{rep}")

                async def fill(impl: Impl = impl, loop: Loop = loop) -> None:
                    await _fill(impl, loop, many)

                ops["append_batch"].add(impl.name, await timed_turn(fill) * 1000 / n)
                final[impl.name] = loop
            for impl in impls:
                if impl.name not in final:
                    continue
                loop = final[impl.name]
                got: list[Any] = []

                async def first(impl: Impl = impl, loop: Loop = loop, got: list[Any] = got) -> None:
                    got.extend(await impl.read(loop))

                ops["read_first"].add(impl.name, await timed_turn(first) * 1000)
                if len(got) != n:
                    raise RuntimeError(f"{impl.label} read {len(got)} messages, expected {n}")
            for op_name, count, last in (
                ("read_all", args.api_reads, None),
                ("read_last", args.api_tail_reads, TAIL),
            ):
                for impl in impls:
                    if impl.name not in final:
                        continue

                    async def reads(
                        impl: Impl = impl,
                        loop: Loop = final[impl.name],
                        count: int = count,
                        last: Any = last,
                    ) -> None:
                        for _ in range(count):
                            await impl.read(loop, last=last)

                    ops[op_name].add(impl.name, await timed_turn(reads) * 1000 / count)
    finally:
        for impl in impls:
            await impl.close()
    return ops


def _logical_bytes(path: Path) -> int:
    """The database's used bytes as a new reader sees them (the WAL included)."""
    conn = sqlite3.connect(path)
    page_size, pages, free = (
        conn.execute(f"PRAGMA {p}").fetchone()[0]
        for p in ("page_size", "page_count", "freelist_count")
    )
    conn.close()
    return int(page_size * (pages - free))


async def measure_bytes(
    directory: Path, oa_sqlite: Callable[[Path], Impl], size: str, n: int
) -> dict[str, float]:
    """Return each store's database bytes per message: one session of `n` messages alone."""
    items = api_items(n, size)
    ours_path = directory / f"bytes-ss-{size}-{n}.db"
    oa_path = directory / f"bytes-oa-{size}-{n}.db"
    ours_url = normalize_url(f"sqlite+aiosqlite:///{ours_path}")
    await migrate.upgrade(ours_url)
    out: dict[str, float] = {}
    for name, impl, path in (
        ("sessionstore", DecodedStore(ours_url), ours_path),
        ("oa_sqlite", oa_sqlite(oa_path), oa_path),
    ):
        await impl.open()
        try:
            loop = await impl.new_loop("bytes")
            await impl.append(loop, items[:1])
            empty = _logical_bytes(path)
            await _fill(impl, loop, items[1:])
            out[name] = (_logical_bytes(path) - empty) / (n - 1)
        finally:
            await impl.close()
    return out


# ── the section ─────────────────────────────────────────────────────────────────


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the Python API section")
    group.add_argument("--api", action="store_true", help="run only the Python API section")
    group.add_argument("--no-api", action="store_true", help="skip the Python API section")
    group.add_argument("--api-sizes", default="5000,10000", help="history sizes (5000,10000)")
    group.add_argument("--api-items", default="small,large", help="item sizes (small,large)")
    group.add_argument("--api-single", type=int, default=500, help="one-message appends a run")
    group.add_argument("--api-reads", type=int, default=5, help="warm full reads a run")
    group.add_argument("--api-tail-reads", type=int, default=100, help="newest-50 reads a run")
    group.add_argument(
        "--api-postgres-only",
        action="store_true",
        help="PostgreSQL's tables only (needs --postgres-url): skip the SQLite ones",
    )


async def run_api(
    args: argparse.Namespace,
    sqlite_peers: Callable[[Path, Callable[[str], URL]], list[Impl]],
    oa_sqlite: Callable[[Path], Impl],
    postgres_impls: Callable[[URL], list[Impl]] | None = None,
    postgres_db: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Run the section on SQLite, and on PostgreSQL when `postgres_db` is given.

    `sqlite_peers(directory, url)` returns the peers on their own files (`url(name)` is a
    SQLite URL in `directory`); `postgres_impls(url)` the peers and raw asyncpg.
    """
    sizes = [int(s) for s in args.api_sizes.split(",")]
    kinds = args.api_items.split(",")
    result: dict[str, Any] = {
        "item_bytes": {k: mean_bytes(api_items(300, k)) for k in kinds},
        "single": args.api_single,
        "tables": [],
    }
    for kind in kinds if not args.api_postgres_only else []:
        for n in sizes:
            directory = Path(tempfile.mkdtemp(prefix="sessionstore_api_"))
            try:

                def url(name: str, directory: Path = directory) -> URL:
                    return normalize_url(f"sqlite+aiosqlite:///{directory / name}")

                ours = url("sessionstore.db")
                await migrate.upgrade(ours)
                impls: list[Impl] = [DecodedStore(ours)]
                if _has_synchronous_option():
                    impls.append(DecodedStore(ours, synchronous="full"))
                impls += [*sqlite_peers(directory, url), Sqlite3Impl(directory / "sqlite3.db")]
                ops = await measure_api("sqlite", impls, kind, n, args)
                table = _table("sqlite", kind, n, impls, ops)
                table["bytes"] = await measure_bytes(directory, oa_sqlite, kind, n)
                result["tables"].append(table)
            finally:
                _rmtree(directory)
    if postgres_impls is not None and postgres_db is not None:
        for kind in kinds:
            for n in sizes:
                async with postgres_db() as (pg_url, _version):
                    impls = [DecodedStore(pg_url), *postgres_impls(pg_url)]
                    ops = await measure_api("postgres", impls, kind, n, args)
                    result["tables"].append(_table("postgres", kind, n, impls, ops))
    return result


def _has_synchronous_option() -> bool:
    import inspect

    from sessionstore import make_engine

    return "synchronous" in inspect.signature(make_engine).parameters


def _rmtree(directory: Path) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


_FLOORS = (Sqlite3Impl.name, AsyncpgImpl.name)


def _table(
    backend: str, kind: str, n: int, impls: list[Impl], ops: dict[str, Op]
) -> dict[str, Any]:
    ours = "sessionstore"
    peers = [
        i.name for i in impls if not i.name.startswith("sessionstore") and i.name not in _FLOORS
    ]
    floor = next((i.name for i in impls if i.name in _FLOORS), None)
    rows = []
    for op in ops.values():
        value = op.median(ours)
        measured = {p: m for p in peers if (m := op.median(p)) is not None}
        best = min(measured, key=measured.__getitem__) if measured else None
        row: dict[str, Any] = {
            "name": op.name,
            "label": op.label,
            "unit": op.unit,
            "medians": {i.name: op.median(i.name) for i in impls},
            "runs": op.runs,
        }
        if value is not None and best is not None:
            row["best_peer"] = best
            row["ratio"] = value / measured[best]
            if backend == "sqlite":
                row["goal"] = GOALS.get(op.name)
        floor_value = op.median(floor) if floor else None
        if value is not None and floor_value:
            row["vs_floor"] = value / floor_value
        full = op.median("sessionstore_full")
        if op.name == "append_one" and full is not None and best is not None:
            row["full_ratio"] = full / measured[best]
        rows.append(row)
    return {
        "backend": backend,
        "items": kind,
        "n": n,
        "labels": {i.name: i.label for i in impls},
        "rows": rows,
    }


def render_api(result: dict[str, Any]) -> str:
    lines = [
        "Python API (every read message decoded; medians; ratios to the best peer and the "
        f"raw floor); item JSON bytes: {result['item_bytes']}, "
        f"{result['single']} one-message appends a run",
    ]
    for table in result["tables"]:
        labels = table["labels"]
        names = list(labels)
        header = [
            "operation",
            "unit",
            *(labels[n] for n in names),
            "/ best peer",
            "/ floor",
            "goal",
        ]
        rows = [header]
        for row in table["rows"]:
            cells = [row["label"], row["unit"]]
            cells += ["-" if row["medians"][n] is None else fmt(row["medians"][n]) for n in names]
            ratio = row.get("ratio")
            text = "-" if ratio is None else f"{ratio:.2f}x"
            if "full_ratio" in row:
                text += f" (FULL {row['full_ratio']:.2f}x)"
            cells.append(text)
            cells.append(f"{row['vs_floor']:.2f}x" if "vs_floor" in row else "-")
            goal = row.get("goal")
            met = "" if goal is None or ratio is None else (" met" if ratio <= goal else " **no**")
            cells.append("-" if goal is None else f"<= {goal}x{met}")
            rows.append(cells)
        title = f"{table['backend']}, {table['items']} items, N = {table['n']:,}"
        lines += ["", title + ":", "", *_markdown(rows)]
        if "bytes" in table:
            b = table["bytes"]
            ratio = b["sessionstore"] / b["oa_sqlite"]
            verdict = "met" if ratio <= BYTES_GOAL else "**no**"
            lines.append(
                f"\ndatabase bytes/message: sessionstore {b['sessionstore']:.0f}, "
                f"SDK SQLiteSession {b['oa_sqlite']:.0f}: {ratio:.2f}x "
                f"(goal <= {BYTES_GOAL}x: {verdict})"
            )
    return "\n".join(lines)


def _markdown(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(rows[0], widths, strict=True)) + " |"]
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows[1:]:
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    return out
