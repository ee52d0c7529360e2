"""Benchmark sessionstore's append and read paths against bare-driver baselines.

Run from a checkout, with the package installed:

    python bench/bench_store.py [--postgres-url URL] [--messages 10000] [--repeat 3] [--json]

For each backend (SQLite always; PostgreSQL when a URL is given, by flag or through
`SESSIONSTORE_TEST_POSTGRES_URL`) the script makes a fresh temporary database (a temp
file; a `sessionstore_bench_<random>` database created and finally dropped through the
URL's admin database), migrates it with `sessionstore.migrate.upgrade`, and measures,
as the median of `--repeat` runs:

1. `append_one`: one message per `append_messages` call (`--single` calls), ms/message;
2. `append_batch`: 100 messages per call up to `--messages`, ms/message;
3. `read_all`: `get_messages(session_id, loop_id)` of the whole loop just written, ms/read;
4. `read_last`: `get_messages(session_id, loop_id, last=50)`, ms/read.

Beside each figure, in the same process and interleaved run by run, the same rows are
written and read by baselines on the same database: the bare driver (stdlib `sqlite3`
with WAL and synchronous=NORMAL, run on the event-loop thread, or `asyncpg`) and bare
SQLAlchemy async Core on the store's async driver (aiosqlite or asyncpg), one
transaction per call. The baselines
store the same JSON payloads but skip what only the store does (validation, content
hash, token count, turn assignment, the session lock, loop counters): the ratio
sessionstore / baseline is the price of those. Timings on a shared machine are noisy:
compare ratios, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import secrets
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from _common import log, machine_info
from sqlalchemy import event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sessionstore import (
    AssistantMessage,
    HeuristicTokenCounter,
    Message,
    SessionStore,
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

POSTGRES_ENV = "SESSIONSTORE_TEST_POSTGRES_URL"
BATCH_SIZE = 100
TAIL = 50

# The targets, for SQLite: (comparison, value in the operation's unit).
SQLITE_TARGETS: dict[str, tuple[str, float]] = {
    "append_one": ("<=", 0.5),
    "append_batch": ("<=", 0.02),
    "read_all": ("<", 30.0),
}

TARGET_READ_MESSAGES = 10_000

# Peer figures from shared/PEERS.md beside the checkout ("Measured on this kind of machine": SQLite
# file, median of 3, 2 vCPU). Printed for context only: not measured by this script.
PEERS: dict[str, list[tuple[str, str]]] = {
    "append_one": [
        ("OpenAI Agents SQLiteSession", "0.44-0.59"),
        ("OpenAI Agents AsyncSQLiteSession", "0.70-0.90"),
        ("OpenAI Agents SQLAlchemySession", "3.5-4.7"),
        ("ADK DatabaseSessionService", "7.1"),
        ("bare SA async Core on aiosqlite", "1.1-1.3 (0.75 with synchronous=NORMAL)"),
    ],
    "append_batch": [
        ("OpenAI Agents SQLiteSession", "0.01-0.02"),
        ("OpenAI Agents AsyncSQLiteSession", "0.02-0.03"),
        ("OpenAI Agents SQLAlchemySession", "0.08-0.11"),
        ("ADK DatabaseSessionService", "no batch API"),
    ],
    "read_all": [
        ("OpenAI Agents stores", "28-43"),
        ("ADK DatabaseSessionService", "740-1600"),
    ],
}

OPERATIONS = {
    "append_one": ("append 1 msg/call", "ms/msg"),
    "append_batch": (f"append {BATCH_SIZE} msg/call", "ms/msg"),
    "read_all": ("read whole loop", "ms/read"),  # the label gets the loop's size
    "read_last": (f"read newest {TAIL}", "ms/read"),
}


# ── workload ────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Item:
    """One message, with the row values a baseline stores for it (computed up front)."""

    message: Message
    kind: str
    payload: dict[str, Any]
    token_count: int
    turn_index: int


def make_items(count: int, tool_lines: int = 30) -> list[Item]:
    """Return `count` realistic messages: user text, assistant + tool call, tool output.

    They cycle through a user request (~300 bytes of JSON), an assistant message with
    text and one `bash` tool call (~430 bytes), and the tool's result: `tool_lines`
    lines of pytest output (~1,750 bytes for 30 lines).
    """
    counter = HeuristicTokenCounter()
    turns = TurnAssigner()
    items = []
    for n in range(count):
        k, step = divmod(n, 3)
        module = f"pkg/module_{k % 37}.py"
        message: Message
        if step == 0:
            message = UserMessage(
                content=f"Step {k}: the test test_case_{k} in tests/test_module_{k % 37}.py "
                f"fails after the refactor of {module}. Find out why, fix it, and rerun "
                "the whole file. Keep the public API unchanged and explain what you changed."
            )
        elif step == 1:
            message = AssistantMessage(
                content=[
                    TextContent(text=f"I'll run the failing tests of {module} first."),
                    ToolCall(
                        id=f"call_{k:06d}",
                        name="bash",
                        arguments=json.dumps(
                            {"command": f"pytest tests/test_module_{k % 37}.py -x -q"}
                        ),
                    ),
                ],
                model="bench-model-1",
                stop_reason="tool_calls",
                usage=Usage(input_tokens=1200 + k, output_tokens=48),
            )
        else:
            lines = [
                f"tests/test_module_{k % 37}.py::test_case_{j} "
                f"{'FAILED' if j == k % 30 else 'PASSED'}  [{(j + 1) * 100 // 30:3d}%]"
                for j in range(tool_lines)
            ]
            message = ToolResultMessage(
                tool_call_id=f"call_{k:06d}", tool_name="bash", content="\n".join(lines)
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


def mean_payload_bytes(tool_lines: int) -> int:
    """Return the mean size of the stored JSON payload of the workload's messages."""
    return round(statistics.mean(len(json.dumps(i.payload)) for i in make_items(300, tool_lines)))


def chunks(items: Sequence[Item], size: int) -> list[Sequence[Item]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# ── implementations ─────────────────────────────────────────────────────────────


@dataclass(slots=True)
class Loop:
    """A loop being written by one implementation."""

    session_id: str
    loop_id: int | None = None
    next_position: int = 0


class Impl:
    """One way of storing the rows: sessionstore or a baseline."""

    name: str
    label: str
    short: str

    async def open(self) -> None:
        """Connect and create what the implementation needs."""

    async def close(self) -> None:
        """Release connections."""

    async def new_loop(self, tag: str) -> Loop:
        raise NotImplementedError

    async def append(self, loop: Loop, items: Sequence[Item]) -> None:
        """Write `items` in one transaction."""
        raise NotImplementedError

    async def read(self, loop: Loop, last: int | None = None) -> Sequence[Any]:
        """Return the loop's messages, decoded (the newest `last` when given)."""
        raise NotImplementedError


class StoreImpl(Impl):
    name = "sessionstore"
    label = "sessionstore"
    short = "sessionstore"

    def __init__(self, url: URL) -> None:
        self._url = url
        self._store: SessionStore | None = None

    @property
    def store(self) -> SessionStore:
        assert self._store is not None
        return self._store

    async def open(self) -> None:
        self._store = SessionStore.from_url(self._url)

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None

    async def new_loop(self, tag: str) -> Loop:
        session = await self.store.create_session(app_name="bench", user_id=tag)
        return Loop(session.id)

    async def append(self, loop: Loop, items: Sequence[Item]) -> None:
        stored = await self.store.append_messages(loop.session_id, [i.message for i in items])
        loop.loop_id = stored[-1].loop_id

    async def read(self, loop: Loop, last: int | None = None) -> Sequence[Any]:
        return await self.store.get_messages(loop.session_id, loop.loop_id, last=last)


def _row(loop: Loop, offset: int, item: Item, now: Any, payload: Any) -> dict[str, Any]:
    return {
        "session_id": loop.session_id,
        "loop_id": 1,
        "position": loop.next_position + offset,
        "turn_index": item.turn_index,
        "kind": item.kind,
        "payload": payload,
        "token_count": item.token_count,
        "created_at": now,
    }


_SQLITE_DDL = """
CREATE TABLE IF NOT EXISTS bench_raw_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id VARCHAR(128) NOT NULL,
    loop_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    turn_index INTEGER NOT NULL,
    kind VARCHAR(32) NOT NULL,
    payload TEXT NOT NULL,
    token_count INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (session_id, loop_id, position)
)
"""
_SQLITE_INSERT = (
    "INSERT INTO bench_raw_messages (session_id, loop_id, position, turn_index, kind, "
    "payload, token_count, created_at) VALUES (:session_id, :loop_id, :position, "
    ":turn_index, :kind, :payload, :token_count, :created_at)"
)
_SQLITE_SELECT = (
    "SELECT id, position, turn_index, kind, token_count, created_at, payload "
    "FROM bench_raw_messages WHERE session_id = ? AND loop_id = ? "
)


class Sqlite3Impl(Impl):
    """The stdlib driver: one INSERT (or executemany) + commit per call, WAL, synchronous=NORMAL."""

    name = "sqlite3"
    label = "raw sqlite3"
    short = "sqlite3"

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None
        self._loops = 0

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None
        return self._conn

    async def open(self) -> None:
        self._conn = sqlite3.connect(self._path)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute(_SQLITE_DDL)
        self.conn.commit()

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def new_loop(self, tag: str) -> Loop:
        self._loops += 1
        return Loop(f"{tag}-{self._loops}", 1)

    async def append(self, loop: Loop, items: Sequence[Item]) -> None:
        now = datetime.now(UTC).isoformat()
        if len(items) == 1:
            item = items[0]
            self.conn.execute(_SQLITE_INSERT, _row(loop, 0, item, now, json.dumps(item.payload)))
        else:
            self.conn.executemany(
                _SQLITE_INSERT,
                [_row(loop, i, it, now, json.dumps(it.payload)) for i, it in enumerate(items)],
            )
        self.conn.commit()
        loop.next_position += len(items)

    async def read(self, loop: Loop, last: int | None = None) -> Sequence[Any]:
        if last is None:
            sql = _SQLITE_SELECT + "ORDER BY position"
            rows = self.conn.execute(sql, (loop.session_id, 1)).fetchall()
        else:
            sql = _SQLITE_SELECT + "ORDER BY position DESC LIMIT ?"
            rows = self.conn.execute(sql, (loop.session_id, 1, last)).fetchall()[::-1]
        self.conn.commit()  # end the implicit read transaction, as a one-call read would
        return [(*row[:-1], json.loads(row[-1])) for row in rows]


class CoreImpl(Impl):
    """Bare SQLAlchemy async Core on the store's async driver, one transaction per call."""

    name = "core"
    short = "Core"

    def __init__(self, url: URL) -> None:
        self._url = url
        self.label = f"SA Core/{url.get_driver_name()}"
        self._engine: AsyncEngine | None = None
        meta = sa.MetaData()
        self.table = sa.Table(
            "bench_core_messages",
            meta,
            sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
            sa.Column("session_id", sa.String(128), nullable=False),
            sa.Column("loop_id", sa.BigInteger(), nullable=False),
            sa.Column("position", sa.Integer(), nullable=False),
            sa.Column("turn_index", sa.Integer(), nullable=False),
            sa.Column("kind", sa.String(32), nullable=False),
            sa.Column("payload", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=False),
            sa.Column("token_count", sa.Integer(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.UniqueConstraint("session_id", "loop_id", "position"),
            sqlite_autoincrement=True,
        )
        self._loops = 0
        c = self.table.c
        self._select = sa.select(
            c.id, c.position, c.turn_index, c.kind, c.token_count, c.created_at, c.payload
        )

    @property
    def engine(self) -> AsyncEngine:
        assert self._engine is not None
        return self._engine

    async def open(self) -> None:
        self._engine = create_async_engine(self._url)
        if self._url.get_backend_name() == "sqlite":

            @event.listens_for(self._engine.sync_engine, "connect")
            def _pragmas(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.close()

        async with self.engine.begin() as conn:
            await conn.run_sync(self.table.metadata.create_all)

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    async def new_loop(self, tag: str) -> Loop:
        self._loops += 1
        return Loop(f"{tag}-{self._loops}", 1)

    async def append(self, loop: Loop, items: Sequence[Item]) -> None:
        now = datetime.now(UTC)
        rows = [_row(loop, i, item, now, item.payload) for i, item in enumerate(items)]
        async with self.engine.begin() as conn:
            await conn.execute(sa.insert(self.table), rows[0] if len(rows) == 1 else rows)
        loop.next_position += len(items)

    async def read(self, loop: Loop, last: int | None = None) -> Sequence[Any]:
        c = self.table.c
        stmt = self._select.where(c.session_id == loop.session_id, c.loop_id == 1)
        async with self.engine.connect() as conn:
            if last is None:
                return (await conn.execute(stmt.order_by(c.position))).all()
            stmt = stmt.order_by(c.position.desc()).limit(last)
            return (await conn.execute(stmt)).all()[::-1]


_PG_DDL = """
CREATE TABLE IF NOT EXISTS bench_raw_messages (
    id BIGSERIAL PRIMARY KEY,
    session_id VARCHAR(128) NOT NULL,
    loop_id BIGINT NOT NULL,
    position INTEGER NOT NULL,
    turn_index INTEGER NOT NULL,
    kind VARCHAR(32) NOT NULL,
    payload JSONB NOT NULL,
    token_count INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (session_id, loop_id, position)
)
"""
_PG_INSERT = (
    "INSERT INTO bench_raw_messages (session_id, loop_id, position, turn_index, kind, "
    "payload, token_count, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)
_PG_SELECT = (
    "SELECT id, position, turn_index, kind, token_count, created_at, payload "
    "FROM bench_raw_messages WHERE session_id = $1 AND loop_id = $2 "
)


class AsyncpgImpl(Impl):
    """The bare asyncpg driver: one connection, one transaction per call."""

    name = "asyncpg"
    label = "raw asyncpg"
    short = "asyncpg"

    def __init__(self, url: URL) -> None:
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._conn: Any = None
        self._loops = 0

    async def open(self) -> None:
        import asyncpg

        self._conn = await asyncpg.connect(self._dsn)
        await self._conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )
        await self._conn.execute(_PG_DDL)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def new_loop(self, tag: str) -> Loop:
        self._loops += 1
        return Loop(f"{tag}-{self._loops}", 1)

    @staticmethod
    def _args(loop: Loop, offset: int, item: Item, now: datetime) -> tuple[Any, ...]:
        return (
            loop.session_id,
            1,
            loop.next_position + offset,
            item.turn_index,
            item.kind,
            item.payload,
            item.token_count,
            now,
        )

    async def append(self, loop: Loop, items: Sequence[Item]) -> None:
        now = datetime.now(UTC)
        async with self._conn.transaction():
            if len(items) == 1:
                await self._conn.execute(_PG_INSERT, *self._args(loop, 0, items[0], now))
            else:
                args = [self._args(loop, i, item, now) for i, item in enumerate(items)]
                await self._conn.executemany(_PG_INSERT, args)
        loop.next_position += len(items)

    async def read(self, loop: Loop, last: int | None = None) -> Sequence[Any]:
        if last is None:
            return await self._conn.fetch(_PG_SELECT + "ORDER BY position", loop.session_id, 1)
        sql = _PG_SELECT + "ORDER BY position DESC LIMIT $3"
        return (await self._conn.fetch(sql, loop.session_id, 1, last))[::-1]


# ── measuring ───────────────────────────────────────────────────────────────────


async def timed(work: Callable[[], Awaitable[None]]) -> float:
    """Return the seconds `work` takes, after a garbage collection (GC stays enabled)."""
    gc.collect()
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start


@dataclass
class Operation:
    name: str
    count: int
    """Messages (appends) or reads per run."""
    runs: dict[str, list[float]] = field(default_factory=dict)

    def median(self, impl: str) -> float:
        return statistics.median(self.runs[impl])


async def measure_backend(
    name: str, impls: Sequence[Impl], args: argparse.Namespace
) -> dict[str, Operation]:
    """Run the four operations on every implementation, interleaved run by run.

    The workload's messages are built before the appends that use them and freed
    after, so the reads run on a heap of the usual size: every implementation's
    reads allocate many objects and pay for the cyclic garbage collector in
    proportion to what else is alive.
    """
    ops = {
        "append_one": Operation("append_one", args.single),
        "append_batch": Operation("append_batch", args.messages),
        "read_all": Operation("read_all", args.reads),
        "read_last": Operation("read_last", args.tail_reads),
    }
    for op in ops.values():
        op.runs = {impl.name: [] for impl in impls}

    # Warm up: connections, statement caches, imports, first-loop creation.
    warm = make_items(30, args.tool_lines)
    for impl in impls:
        loop = await impl.new_loop("warmup")
        for part in chunks(warm, 1):
            await impl.append(loop, part)
        await impl.append(loop, warm)
        await impl.read(loop)
        await impl.read(loop, last=TAIL)
    del warm

    async def appends(op: Operation, per_call: int, tag: str) -> dict[str, Loop]:
        parts = chunks(make_items(op.count, args.tool_lines), per_call)
        written: dict[str, Loop] = {}
        for rep in range(args.repeat):
            log(f"  [{name}] run {rep + 1}/{args.repeat}: append {per_call}/call")
            for impl in impls:
                loop = await impl.new_loop(f"{tag}-{rep}")

                async def work(impl: Impl = impl, loop: Loop = loop) -> None:
                    for part in parts:
                        await impl.append(loop, part)

                seconds = await timed(work)
                op.runs[impl.name].append(seconds * 1000 / op.count)
                written[impl.name] = loop
        return written

    await appends(ops["append_one"], 1, "one")
    final = await appends(ops["append_batch"], BATCH_SIZE, "batch")

    for impl in impls:  # check what was written, outside the timings
        got = len(await impl.read(final[impl.name]))
        if got != args.messages:
            raise RuntimeError(f"{impl.label} read {got} messages, expected {args.messages}")
        got = len(await impl.read(final[impl.name], last=TAIL))
        if got != min(TAIL, args.messages):
            raise RuntimeError(f"{impl.label} read {got} newest messages, expected {TAIL}")

    for rep in range(args.repeat):
        log(f"  [{name}] run {rep + 1}/{args.repeat}: reads")
        for op_name, reads, last in (
            ("read_all", args.reads, None),
            ("read_last", args.tail_reads, TAIL),
        ):
            for impl in impls:

                async def work(
                    impl: Impl = impl, reads: int = reads, last: int | None = last
                ) -> None:
                    for _ in range(reads):
                        await impl.read(final[impl.name], last=last)

                seconds = await timed(work)
                ops[op_name].runs[impl.name].append(seconds * 1000 / reads)
    return ops


# ── backends ────────────────────────────────────────────────────────────────────


async def run_sqlite(args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="sessionstore_bench_"))
    path = directory / "bench.db"
    url = normalize_url(f"sqlite+aiosqlite:///{path}")
    impls: list[Impl] = [StoreImpl(url), Sqlite3Impl(path), CoreImpl(url)]
    try:
        await migrate.upgrade(url)
        for impl in impls:
            await impl.open()
        ops = await measure_backend("sqlite", impls, args)
    finally:
        for impl in impls:
            await impl.close()
        shutil.rmtree(directory, ignore_errors=True)
    title = f"SQLite {sqlite3.sqlite_version} (file, WAL)"
    return report("sqlite", title, impls, ops, messages=args.messages, targets=True)


async def run_postgres(admin_url: URL, args: argparse.Namespace) -> dict[str, Any]:
    name = f"sessionstore_bench_{secrets.token_hex(6)}"
    admin = create_async_engine(admin_url, isolation_level="AUTOCOMMIT")
    url = admin_url.set(database=name)
    impls: list[Impl] = [StoreImpl(url), AsyncpgImpl(url), CoreImpl(url)]
    created = False
    try:
        async with admin.connect() as conn:
            version = (await conn.execute(sa.text("SHOW server_version"))).scalar_one()
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            created = True
        log(f"  [postgres] created temporary database {name}")
        await migrate.upgrade(url)
        for impl in impls:
            await impl.open()
        ops = await measure_backend("postgres", impls, args)
    finally:
        for impl in impls:
            await impl.close()
        if created:
            async with admin.connect() as conn:
                await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            log(f"  [postgres] dropped {name}")
        await admin.dispose()
    title = f"PostgreSQL {version}"
    return report("postgres", title, impls, ops, messages=args.messages, targets=False)


def report(
    backend: str,
    title: str,
    impls: Sequence[Impl],
    ops: dict[str, Operation],
    *,
    messages: int,
    targets: bool,
) -> dict[str, Any]:
    store, baselines = impls[0], impls[1:]
    out: dict[str, Any] = {"backend": backend, "title": title, "operations": []}
    for op in ops.values():
        label, unit = OPERATIONS[op.name]
        if op.name == "read_all":
            label = f"read all {messages:,}"
        ours = op.median(store.name)
        entry: dict[str, Any] = {
            "name": op.name,
            "label": label,
            "unit": unit,
            "per_run": op.count,
            "results": {
                impl.name: {
                    "label": impl.label,
                    "short": impl.short,
                    "median": op.median(impl.name),
                    "runs": op.runs[impl.name],
                }
                for impl in impls
            },
            "ratios": {b.name: ours / op.median(b.name) for b in baselines},
        }
        # The read target is for a loop of 10,000 messages: judge it at that size only.
        sized = op.name != "read_all" or messages == TARGET_READ_MESSAGES
        if targets and sized and op.name in SQLITE_TARGETS:
            comparison, value = SQLITE_TARGETS[op.name]
            met = ours <= value if comparison == "<=" else ours < value
            entry["target"] = {"comparison": comparison, "value": value, "met": met}
        out["operations"].append(entry)
    return out


# ── output ──────────────────────────────────────────────────────────────────────


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    if value >= 0.1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def render(result: dict[str, Any]) -> str:
    ops = result["operations"]
    impl_labels = [r["label"] for r in ops[0]["results"].values()]
    baseline_names = list(ops[0]["ratios"])
    header = ["operation", "unit", *impl_labels]
    header += [f"vs {ops[0]['results'][b]['short']}" for b in baseline_names]
    has_targets = any("target" in op for op in ops)
    if has_targets:
        header += ["target", "met?"]
    rows = [header]
    for op in ops:
        row = [op["label"], op["unit"]]
        row += [fmt(r["median"]) for r in op["results"].values()]
        row += [f"{op['ratios'][b]:.1f}x" for b in baseline_names]
        if has_targets:
            target = op.get("target")
            if target is None:
                row += ["-", "-"]
            else:
                row += [
                    f"{target['comparison']} {fmt(target['value'])}",
                    "met" if target["met"] else "NOT met",
                ]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [f"{result['title']}: medians; vs X = sessionstore / X"]
    for n, row in enumerate(rows):
        cells = [
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_peers() -> str:
    lines = ["Peer figures from PEERS.md (SQLite file, 2 vCPU; not measured here):"]
    for op_name, entries in PEERS.items():
        label, unit = OPERATIONS[op_name]
        lines.append(f"  {label} ({unit}):")
        lines += [f"    {who}: {figure}" for who, figure in entries]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(POSTGRES_ENV),
        help=f"admin URL of a PostgreSQL server (default: ${POSTGRES_ENV}); a temporary "
        "database is created beside it and dropped at the end",
    )
    parser.add_argument(
        "--messages",
        type=int,
        default=10_000,
        help="messages written in batches of 100 per run, and read back (default: %(default)s)",
    )
    parser.add_argument(
        "--single",
        type=int,
        default=2_000,
        help="messages appended one per call per run (default: %(default)s)",
    )
    parser.add_argument(
        "--reads", type=int, default=10, help="full reads per run (default: %(default)s)"
    )
    parser.add_argument(
        "--tail-reads",
        type=int,
        default=200,
        help=f"reads of the newest {TAIL} per run (default: %(default)s)",
    )
    parser.add_argument(
        "--tool-lines",
        type=int,
        default=30,
        help="lines of output in each tool result message (default: %(default)s)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--sqlite-only", action="store_true", help="skip PostgreSQL even when a URL is set"
    )
    args = parser.parse_args(argv)
    for name in ("messages", "single", "reads", "tail_reads", "tool_lines", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    # Treat SIGTERM like Ctrl-C: cancel, so the temporary databases are still removed.
    task = asyncio.current_task()
    if task is not None and hasattr(signal, "SIGTERM"):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    results: dict[str, Any] = {
        "config": {
            "messages": args.messages,
            "single": args.single,
            "batch_size": BATCH_SIZE,
            "reads": args.reads,
            "tail_reads": args.tail_reads,
            "tail": TAIL,
            "repeat": args.repeat,
            "tool_lines": args.tool_lines,
            "mean_payload_bytes": mean_payload_bytes(args.tool_lines),
        },
        "machine": machine_info(),
        "targets_sqlite": {
            name: {"comparison": comparison, "value": value}
            for name, (comparison, value) in SQLITE_TARGETS.items()
        },
        "peers": {k: dict(v) for k, v in PEERS.items()},
        "backends": [],
    }
    started = time.perf_counter()
    log("sqlite: measuring")
    results["backends"].append(await run_sqlite(args))
    results["backends"][-1]["elapsed_s"] = time.perf_counter() - started
    if args.postgres_url and not args.sqlite_only:
        admin_url = normalize_url(args.postgres_url)
        started = time.perf_counter()
        log("postgres: measuring")
        backend = await run_postgres(admin_url, args)
        backend["elapsed_s"] = time.perf_counter() - started
        results["backends"].append(backend)
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
    c = results["config"]
    print(
        f"sessionstore {m['sessionstore']} ({m['revision'] or 'no git checkout'}) | "
        f"Python {m['python']} | SQLite {m['sqlite']} | "
        f"SQLAlchemy {m['sqlalchemy']} | {m['cpus']} CPUs | {m['platform']}"
    )
    print(
        f"append 1/call: {c['single']} messages/run; append {c['batch_size']}/call: "
        f"{c['messages']} messages/run; full reads of {c['messages']}: {c['reads']}/run; "
        f"newest {c['tail']}: {c['tail_reads']}/run; median of {c['repeat']} runs"
    )
    print(
        f"messages cycle user / assistant + tool call / tool result ({c['tool_lines']} "
        f"lines of output): {c['mean_payload_bytes']} bytes of JSON payload on average"
    )
    for backend in results["backends"]:
        print()
        print(render(backend))
        print(f"({backend['elapsed_s']:.0f} s)")
    print()
    print(render_peers())
    return 0


if __name__ == "__main__":
    sys.exit(main())
