"""Benchmark sessionstore side by side with the stores users would otherwise pick.

Run from a checkout, after `pip install -e ".[dev,bench]"`:

    python bench/bench_peers.py [--quick] [--postgres-url URL] [--repeat 3] [--json]

The peers, each on its own fresh SQLite file (and, where the peer supports it, on its own
tables of one temporary PostgreSQL database):

- the OpenAI Agents SDK's `SQLiteSession` (stdlib sqlite3 in a worker thread),
  `AsyncSQLiteSession` (aiosqlite) and `SQLAlchemySession` (SQLAlchemy async; aiosqlite
  or asyncpg);
- Google ADK's `DatabaseSessionService` (SQLAlchemy async; aiosqlite or asyncpg).

The workload is the one of `bench_store.py`: an agent's user request, assistant message
with a `bash` tool call, and tool output, cycled, built before anything is timed. The
OpenAI peers store each message's stored JSON payload as one item (the same bytes
sessionstore stores); ADK stores each as one `Event` (text, function call, function
response parts), built before timing too.

Measured, as the median of `--repeat` runs interleaved run by run (every implementation
runs once in each run before the next run starts), per message or per read:

1. append one message a call (`--single` calls);
2. append batches of 100 up to `--messages` (ADK has no batch API: not measured);
3. read the whole `--messages` history; 4. read the newest 50;
5. resume: sessionstore's `build_context` of a compacted `--resume-size` session against
   each OpenAI peer's full read (`get_items()`) of the same raw history.

On PostgreSQL, raw asyncpg (one INSERT a transaction) runs in the same runs, as the
baseline of the "append one message within 1.5x of raw asyncpg" goal. Compare ratios
within one run: the machine's load moves the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import _bench_api
import _bench_sdk
from _common import fmt, log, machine_info, postgres_database
from bench_store import (
    AsyncpgImpl,
    Impl,
    Item,
    Loop,
    StoreImpl,
    chunks,
    make_items,
    mean_payload_bytes,
    timed,
)
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sessionstore import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    migrate,
)
from sessionstore.store._engine import normalize_url

try:
    from agents import SQLiteSession
    from agents.extensions.memory import AsyncSQLiteSession, SQLAlchemySession
    from google.adk.events import Event
    from google.adk.sessions import DatabaseSessionService, Session
    from google.adk.sessions.base_session_service import GetSessionConfig
    from google.genai import types
except ImportError as exc:  # pragma: no cover - a hint for a missing extra
    sys.exit(f'bench_peers.py needs the peers: pip install -e ".[bench]" ({exc})')

POSTGRES_ENV = "SESSIONSTORE_TEST_POSTGRES_URL"
BATCH = 100
TAIL = 50
MAX_CONTEXT_TOKENS = 32_000

GOALS: dict[str, tuple[str, float]] = {
    "append_one": ("best peer", 0.8),
    "append_batch": ("best peer", 0.8),
    "read_all": ("best peer", 1.0),
    "read_last": ("best peer", 1.0),
}
"""The issue's goals on SQLite: sessionstore / best peer at most this."""
PG_APPEND_GOAL = 1.5
"""PostgreSQL: sessionstore's append one / raw asyncpg's at most this."""
RESUME_GOAL = 100.0
"""Resume: the best peer's full read / sessionstore's `build_context` at least this."""


# ── peers ───────────────────────────────────────────────────────────────────────


class OpenAIPeer(Impl):
    """An OpenAI Agents SDK session class: each message's stored payload is one item."""

    _sessions: dict[str, Any]

    async def append(self, loop: Loop, items: Sequence[Item]) -> None:
        await self._sessions[loop.session_id].add_items([item.payload for item in items])

    async def add_payloads(self, loop: Loop, payloads: list[dict[str, Any]]) -> None:
        await self._sessions[loop.session_id].add_items(payloads)

    async def read(self, loop: Loop, last: int | None = None) -> Sequence[Any]:
        items: Sequence[Any] = await self._sessions[loop.session_id].get_items(limit=last)
        return items


class OpenAISQLite(OpenAIPeer):
    """The OpenAI Agents SDK's `SQLiteSession`: stdlib sqlite3 in `asyncio.to_thread`."""

    name = "oa_sqlite"
    label = "OpenAI SQLiteSession"
    short = "SQLiteSession"

    def __init__(self, path: Path) -> None:
        self._path = path
        self._sessions: dict[str, SQLiteSession] = {}

    async def close(self) -> None:
        for peer in self._sessions.values():
            peer.close()
        self._sessions.clear()

    async def new_loop(self, tag: str) -> Loop:
        session_id = f"{tag}-{len(self._sessions)}"
        self._sessions[session_id] = SQLiteSession(session_id, self._path)
        return Loop(session_id)


class OpenAIAsyncSQLite(OpenAIPeer):
    """The OpenAI Agents SDK's `AsyncSQLiteSession`: one aiosqlite connection a session."""

    name = "oa_async_sqlite"
    label = "OpenAI AsyncSQLiteSession"
    short = "AsyncSQLiteSession"

    def __init__(self, path: Path) -> None:
        self._path = path
        self._sessions: dict[str, AsyncSQLiteSession] = {}

    async def close(self) -> None:
        for peer in self._sessions.values():
            await peer.close()
        self._sessions.clear()

    async def new_loop(self, tag: str) -> Loop:
        session_id = f"{tag}-{len(self._sessions)}"
        self._sessions[session_id] = AsyncSQLiteSession(session_id, self._path)
        return Loop(session_id)


class OpenAISQLAlchemy(OpenAIPeer):
    """The OpenAI Agents SDK's `SQLAlchemySession` on one shared `AsyncEngine`."""

    name = "oa_sqlalchemy"
    label = "OpenAI SQLAlchemySession"
    short = "SQLAlchemySession"

    def __init__(self, url: URL) -> None:
        self._url = url
        self._engine: AsyncEngine | None = None
        self._sessions: dict[str, SQLAlchemySession] = {}

    async def open(self) -> None:
        self._engine = create_async_engine(self._url)

    async def close(self) -> None:
        self._sessions.clear()
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    async def new_loop(self, tag: str) -> Loop:
        assert self._engine is not None
        session_id = f"{tag}-{len(self._sessions)}"
        self._sessions[session_id] = SQLAlchemySession(
            session_id, engine=self._engine, create_tables=True
        )
        return Loop(session_id)


def adk_event(item: Item, timestamp: float) -> Event:
    """Return the ADK event that stands for one workload message."""
    message = item.message
    parts: list[types.Part] = []
    if isinstance(message, AssistantMessage):
        role, author = "model", "agent"
        for block in message.content:
            if isinstance(block, TextContent):
                parts.append(types.Part(text=block.text))
            elif isinstance(block, ToolCall):
                call = types.FunctionCall(
                    id=block.id, name=block.name, args=json.loads(block.arguments)
                )
                parts.append(types.Part(function_call=call))
    elif isinstance(message, ToolResultMessage):
        role, author = "user", "agent"
        response = types.FunctionResponse(
            id=message.tool_call_id, name=message.tool_name, response={"output": message.text}
        )
        parts.append(types.Part(function_response=response))
    else:
        role, author = "user", "user"
        parts.append(types.Part(text=cast(UserMessage, message).text))
    return Event(
        invocation_id="bench",
        author=author,
        content=types.Content(role=role, parts=parts),
        timestamp=timestamp,
    )


class AdkDatabase(Impl):
    """Google ADK's `DatabaseSessionService`: one `append_event` per message."""

    name = "adk"
    label = "ADK DatabaseSessionService"
    short = "ADK"

    def __init__(self, url: URL) -> None:
        self._url = url.render_as_string(hide_password=False)
        self._service: DatabaseSessionService | None = None
        self._sessions: dict[str, Session] = {}
        self._events: dict[int, Event] = {}

    @property
    def service(self) -> DatabaseSessionService:
        assert self._service is not None
        return self._service

    def prepare(self, items: Sequence[Item]) -> None:
        """Build the events of `items` (before timing); each is appended once a session."""
        base = time.time()
        for n, item in enumerate(items):
            self._events.setdefault(id(item), adk_event(item, base + n * 1e-6))

    async def open(self) -> None:
        self._service = DatabaseSessionService(db_url=self._url)

    async def close(self) -> None:
        if self._service is not None:
            await self._service.close()
            self._service = None

    async def new_loop(self, tag: str) -> Loop:
        session = await self.service.create_session(app_name="bench", user_id=tag)
        self._sessions[session.id] = session
        return Loop(session.id)

    async def append(self, loop: Loop, items: Sequence[Item]) -> None:
        session = self._sessions[loop.session_id]
        for item in items:
            await self.service.append_event(session, self._events[id(item)])

    async def bulk(self, loop: Loop, items: Sequence[Item]) -> None:
        """Store `items` in one transaction through ADK's own rows (populating, untimed).

        ADK has no batch API; this fills a history for the reads without 10,000 calls.
        """
        session = self._sessions[loop.session_id]
        schema = self.service._get_schema_classes()
        async with self.service.database_session_factory() as db:
            db.add_all(
                [schema.StorageEvent.from_event(session, self._events[id(i)]) for i in items]
            )
            await db.commit()

    async def read(self, loop: Loop, last: int | None = None) -> Sequence[Any]:
        config = None if last is None else GetSessionConfig(num_recent_events=last)
        session = await self.service.get_session(
            app_name="bench",
            user_id=self._sessions[loop.session_id].user_id,
            session_id=loop.session_id,
            config=config,
        )
        assert session is not None
        return session.events


# ── measuring ───────────────────────────────────────────────────────────────────


@dataclass
class Operation:
    """One operation's runs, in ms a message (appends) or a read, by implementation."""

    name: str
    label: str
    unit: str
    runs: dict[str, list[float]] = field(default_factory=dict)

    def add(self, impl: Impl, value: float) -> None:
        self.runs.setdefault(impl.name, []).append(value)

    def median(self, name: str) -> float | None:
        values = self.runs.get(name)
        return statistics.median(values) if values else None


def _is_slow(impl: Impl) -> bool:
    """ADK takes about a second a full read: it gets fewer reads a run."""
    return isinstance(impl, AdkDatabase)


async def measure(
    backend: str, impls: Sequence[Impl], args: argparse.Namespace
) -> dict[str, Operation]:
    """Run the four operations on every implementation, interleaved run by run."""
    ops = {
        "append_one": Operation("append_one", "append 1 message a call", "ms/msg"),
        "append_batch": Operation("append_batch", f"append batches of {BATCH}", "ms/msg"),
        "read_all": Operation("read_all", f"read all {args.messages:,}", "ms/read"),
        "read_last": Operation("read_last", f"read newest {TAIL}", "ms/read"),
    }
    single = make_items(args.single)
    many = make_items(args.messages)
    warm = make_items(30)
    for impl in impls:
        if isinstance(impl, AdkDatabase):
            for items in (single, many, warm):
                impl.prepare(items)
    for impl in impls:  # connections, statement caches, tables, first-loop creation
        loop = await impl.new_loop("warmup")
        for part in chunks(warm, 1):
            await impl.append(loop, part)
        await impl.read(loop)
        await impl.read(loop, last=TAIL)

    final: dict[str, Loop] = {}
    for rep in range(args.repeat):
        log(f"  [{backend}] run {rep + 1}/{args.repeat}: appends")
        for impl in impls:
            loop = await impl.new_loop(f"one-{rep}")

            async def one(impl: Impl = impl, loop: Loop = loop) -> None:
                for item in single:
                    await impl.append(loop, (item,))

            ops["append_one"].add(impl, await timed(one) * 1000 / len(single))
        for impl in impls:
            loop = await impl.new_loop(f"batch-{rep}")
            if isinstance(impl, AdkDatabase):  # no batch API: populate for the reads only
                if rep == 0:
                    await impl.bulk(loop, many)
                    final[impl.name] = loop
                continue

            async def batches(
                impl: Impl = impl,
                loop: Loop = loop,
                parts: Sequence[Sequence[Item]] = chunks(many, BATCH),
            ) -> None:
                for part in parts:
                    await impl.append(loop, part)

            ops["append_batch"].add(impl, await timed(batches) * 1000 / len(many))
            final[impl.name] = loop

    for impl in impls:  # check what was written, outside the timings
        got = len(await impl.read(final[impl.name]))
        if got != len(many):
            raise RuntimeError(f"{impl.label} read {got} messages, expected {len(many)}")
        got = len(await impl.read(final[impl.name], last=TAIL))
        if got != min(TAIL, len(many)):
            raise RuntimeError(f"{impl.label} read {got} newest messages, expected {TAIL}")

    for rep in range(args.repeat):
        log(f"  [{backend}] run {rep + 1}/{args.repeat}: reads")
        for op_name, reads, last in (
            ("read_all", args.reads, None),
            ("read_last", args.tail_reads, TAIL),
        ):
            for impl in impls:
                count = max(1, reads // 5) if _is_slow(impl) else reads

                async def read(
                    impl: Impl = impl, count: int = count, last: int | None = last
                ) -> None:
                    for _ in range(count):
                        await impl.read(final[impl.name], last=last)

                ops[op_name].add(impl, await timed(read) * 1000 / count)
    return ops


# ── resume ──────────────────────────────────────────────────────────────────────


async def measure_resume(
    directory: Path, peers: Sequence[OpenAIPeer], args: argparse.Namespace
) -> dict[str, Any]:
    """Time `build_context` of a compacted session beside each peer's full read of it."""
    import sqlite3

    from bench_resume import open_sqlite, resume

    size = args.resume_size
    data_dir = Path(args.data_dir) if args.data_dir else directory
    data_dir.mkdir(parents=True, exist_ok=True)
    dataset = await open_sqlite(data_dir, size, args.seed)
    store, session_id = dataset.store, dataset.population.session_id
    loops: dict[str, Loop] = {}
    try:
        # The same raw history, streamed from the store's file into each peer, untimed.
        source = sqlite3.connect(data_dir / f"resume-{size}.db")
        for peer in peers:
            log(f"  [resume {size:,}] copying the history into {peer.label}")
            loop = await peer.new_loop(f"resume-{size}")
            cursor = source.execute(
                "SELECT payload FROM sessionstore_messages WHERE session_id = ? "
                "ORDER BY loop_id, position",
                (session_id,),
            )
            while rows := cursor.fetchmany(2_000):
                await peer.add_payloads(loop, [json.loads(payload) for (payload,) in rows])
            loops[peer.name] = loop
        source.close()
        resume_ms: list[float] = []
        reads: dict[str, list[float]] = {peer.name: [] for peer in peers}
        await resume(store, session_id)  # warm-up
        for rep in range(args.repeat):
            log(f"  [resume {size:,}] run {rep + 1}/{args.repeat}")

            async def build() -> None:
                for _ in range(args.builds):
                    await resume(store, session_id)

            resume_ms.append(await timed(build) * 1000 / args.builds)
            for peer in peers:

                async def full(peer: Impl = peer) -> None:
                    got = await peer.read(loops[peer.name])
                    if len(got) != size:
                        raise RuntimeError(f"{peer.label} read {len(got)} items, expected {size}")

                reads[peer.name].append(await timed(full) * 1000)
    finally:
        await store.close()
    ours = statistics.median(resume_ms)
    medians = {peer.name: statistics.median(reads[peer.name]) for peer in peers}
    best = min(medians, key=lambda name: medians[name])
    return {
        "size": size,
        "resume_ms": ours,
        "resume_runs": resume_ms,
        "peers": {
            peer.name: {"label": peer.label, "median": medians[peer.name], "runs": reads[peer.name]}
            for peer in peers
        },
        "best": best,
        "ratio": medians[best] / ours,
        "goal": RESUME_GOAL,
        "met": medians[best] / ours >= RESUME_GOAL,
    }


# ── backends ────────────────────────────────────────────────────────────────────


def report(
    backend: str, title: str, impls: Sequence[Impl], ops: dict[str, Operation]
) -> dict[str, Any]:
    ours = impls[0]
    peers = [impl for impl in impls[1:] if not isinstance(impl, AsyncpgImpl)]
    out: dict[str, Any] = {"backend": backend, "title": title, "operations": []}
    for op in ops.values():
        value = op.median(ours.name)
        assert value is not None
        figures = {
            impl.name: {
                "label": impl.label,
                "median": op.median(impl.name),
                "runs": op.runs.get(impl.name, []),
            }
            for impl in impls
        }
        measured = {p.name: m for p in peers if (m := op.median(p.name)) is not None}
        best = min(measured, key=lambda name: measured[name])
        entry: dict[str, Any] = {
            "name": op.name,
            "label": op.label,
            "unit": op.unit,
            "results": figures,
            "best_peer": best,
            "ratio": value / measured[best],
        }
        if backend == "sqlite" and op.name in GOALS:
            goal = GOALS[op.name][1]
            entry["goal"] = {
                "against": "best peer",
                "value": goal,
                "met": value / measured[best] <= goal,
            }
        raw = op.median(AsyncpgImpl.name)
        if raw is not None:
            entry["vs_asyncpg"] = value / raw
            if op.name == "append_one":
                entry["goal"] = {
                    "against": "raw asyncpg",
                    "value": PG_APPEND_GOAL,
                    "met": value / raw <= PG_APPEND_GOAL,
                }
        out["operations"].append(entry)
    return out


async def run_sqlite(args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="sessionstore_peers_"))

    def url(name: str) -> URL:
        return normalize_url(f"sqlite+aiosqlite:///{directory / name}")

    impls: list[Impl] = [
        StoreImpl(url("sessionstore.db")),
        OpenAISQLite(directory / "oa_sqlite.db"),
        OpenAIAsyncSQLite(directory / "oa_async_sqlite.db"),
        OpenAISQLAlchemy(url("oa_sqlalchemy.db")),
        AdkDatabase(url("adk.db")),
    ]
    try:
        await migrate.upgrade(url("sessionstore.db"))
        for impl in impls:
            await impl.open()
        ops = await measure("sqlite", impls, args)
        result = report("sqlite", "SQLite file (WAL), each store on its own file", impls, ops)
        if args.resume_size:
            result["resume"] = await measure_resume(
                directory / "resume", [i for i in impls if isinstance(i, OpenAIPeer)], args
            )
    finally:
        for impl in impls:
            await impl.close()
        shutil.rmtree(directory, ignore_errors=True)
    return result


async def run_postgres(admin_url: URL, args: argparse.Namespace) -> dict[str, Any]:
    async with postgres_database(admin_url) as (url, version):
        impls: list[Impl] = [
            StoreImpl(url),
            OpenAISQLAlchemy(url),
            AdkDatabase(url),
            AsyncpgImpl(url),
        ]
        try:
            for impl in impls:
                await impl.open()
            ops = await measure("postgres", impls, args)
        finally:
            for impl in impls:
                await impl.close()
    return report("postgres", f"PostgreSQL {version} (localhost)", impls, ops)


# ── output ──────────────────────────────────────────────────────────────────────


def table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(cell.ljust(w) for cell, w in zip(rows[0], widths, strict=True)) + " |"
    ]
    lines.append(
        "|"
        + "|".join("-" * (w + 2) if i < 2 else "-" * (w + 1) + ":" for i, w in enumerate(widths))
        + "|"
    )
    for row in rows[1:]:
        lines.append(
            "| "
            + " | ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
            + " |"
        )
    return lines


def render(result: dict[str, Any]) -> str:
    ops = result["operations"]
    names = list(ops[0]["results"])
    labels = [ops[0]["results"][n]["label"] for n in names]
    has_raw = any("vs_asyncpg" in op for op in ops)
    header = ["operation", "unit", *labels, "best peer", "sessionstore / best peer"]
    if has_raw:
        header.append("sessionstore / asyncpg")
    header += ["goal", "met?"]
    rows = [header]
    for op in ops:
        row = [op["label"], op["unit"]]
        row += [
            "-" if op["results"][n]["median"] is None else fmt(op["results"][n]["median"])
            for n in names
        ]
        row += [op["results"][op["best_peer"]]["label"], f"{op['ratio']:.2f}x"]
        if has_raw:
            row.append(f"{op['vs_asyncpg']:.2f}x" if "vs_asyncpg" in op else "-")
        goal = op.get("goal")
        if goal is None:
            row += ["-", "-"]
        else:
            row += [f"≤ {goal['value']}x {goal['against']}", "met" if goal["met"] else "**no**"]
        rows.append(row)
    lines = [f"{result['title']} (medians):", "", *table(rows)]
    resume = result.get("resume")
    if resume:
        peers = resume["peers"]
        rows = [
            [
                "operation",
                "unit",
                "sessionstore",
                *(p["label"] for p in peers.values()),
                "best peer / sessionstore",
                "goal",
                "met?",
            ]
        ]
        rows.append(
            [
                f"resume at {resume['size']:,} (build_context vs full read)",
                "ms",
                fmt(resume["resume_ms"]),
                *(fmt(p["median"]) for p in peers.values()),
                f"{resume['ratio']:.0f}x",
                f"≥ {resume['goal']:.0f}x",
                "met" if resume["met"] else "**no**",
            ]
        )
        lines += ["", *table(rows)]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    import os

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(POSTGRES_ENV),
        help=f"admin URL of a PostgreSQL server (default: ${POSTGRES_ENV}); a temporary "
        "database is created beside it and dropped at the end",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--sqlite-only", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--messages", type=int, help="history size for batches and reads (10,000)")
    parser.add_argument("--single", type=int, help="one-message appends a run (1,000)")
    parser.add_argument("--reads", type=int, help="full reads a run (10; ADK a fifth)")
    parser.add_argument("--tail-reads", type=int, help=f"reads of the newest {TAIL} a run (200)")
    parser.add_argument("--resume-size", type=int, help="resume comparison size (100,000; 0 skips)")
    parser.add_argument("--builds", type=int, default=10, help="build_context calls a run")
    parser.add_argument("--data-dir", help="keep the resume database here (see bench_resume.py)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="runs (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--only",
        choices=("api", "sdk"),
        help="only the Python API section (api) or only the SDK sessions section (sdk)",
    )
    _bench_sdk.add_arguments(parser)
    _bench_api.add_arguments(parser)
    args = parser.parse_args(argv)
    defaults = (
        {"messages": 2_000, "single": 200, "reads": 3, "tail_reads": 50, "resume_size": 10_000}
        if args.quick
        else {
            "messages": 10_000,
            "single": 1_000,
            "reads": 10,
            "tail_reads": 200,
            "resume_size": 100_000,
        }
    )
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.repeat < 3 and not args.quick:
        parser.error("--repeat must be at least 3 (medians of at least 3 runs)")
    return args


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "command": " ".join(["python", "bench/bench_peers.py", *sys.argv[1:]]),
        "config": {
            key: getattr(args, key)
            for key in (
                "messages",
                "single",
                "reads",
                "tail_reads",
                "resume_size",
                "builds",
                "repeat",
            )
        },
        "mean_payload_bytes": mean_payload_bytes(30),
        "machine": machine_info()
        | {"openai-agents": _version("openai-agents"), "google-adk": _version("google-adk")},
        "backends": [],
    }
    started = time.perf_counter()
    if not args.api:
        log("sqlite: measuring")
        results["backends"].append(await run_sqlite(args))
        if args.postgres_url and not args.sqlite_only:
            log("postgres: measuring")
            results["backends"].append(await run_postgres(normalize_url(args.postgres_url), args))
    if not args.no_api:
        log("the Python API section: measuring")
        results["api"] = await run_api_section(args)
    results["elapsed_s"] = time.perf_counter() - started
    return results


async def run_api_section(args: argparse.Namespace) -> dict[str, Any]:
    """The Python API section (`_bench_api.py`), with this module's peers."""

    def sqlite_peers(directory: Path, url: Any) -> list[Impl]:
        return [
            OpenAISQLite(directory / "oa_sqlite.db"),
            OpenAIAsyncSQLite(directory / "oa_async_sqlite.db"),
            OpenAISQLAlchemy(url("oa_sqlalchemy.db")),
        ]

    def postgres_impls(url: URL) -> list[Impl]:
        return [OpenAISQLAlchemy(url), AsyncpgImpl(url)]

    with_postgres = args.postgres_url and not args.sqlite_only
    admin = normalize_url(args.postgres_url) if with_postgres else None
    return await _bench_api.run_api(
        args,
        sqlite_peers,
        OpenAISQLite,
        postgres_impls if admin is not None else None,
        (lambda: postgres_database(admin)) if admin is not None else None,
    )


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only == "api":
        args.api = True
    try:
        if args.only == "sdk":
            results = {"command": " ".join(["python", "bench/bench_peers.py", *sys.argv[1:]])}
            results["machine"] = machine_info() | {"openai-agents": _version("openai-agents")}
            results["sdk"] = _bench_sdk.run(args)
            return _print_sdk(results, args)
        results = asyncio.run(main_async(args))
        if args.only is None:
            results["sdk"] = _bench_sdk.run(args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    m, c = results["machine"], results["config"]
    print(f"Command: {results['command']}")
    print(
        f"Machine: {m['platform']}, {m['cpus']} CPUs, Python {m['python']}, SQLite {m['sqlite']}, "
        f"SQLAlchemy {m['sqlalchemy']}, aiosqlite {m['aiosqlite']}, asyncpg {m['asyncpg']}, "
        f"openai-agents {m['openai-agents']}, google-adk {m['google-adk']}; "
        f"sessionstore {m['revision'] or m['sessionstore']}"
    )
    if results["backends"]:
        print(
            f"Workload: {c['single']:,} one-message appends, {c['messages']:,} messages in batches "
            f"of {BATCH}, {c['reads']} full reads and {c['tail_reads']} newest-{TAIL} reads a run "
            f"(ADK: a fifth of the full reads); {results['mean_payload_bytes']} bytes of JSON a "
            f"message on average; median of {c['repeat']} runs; {results['elapsed_s']:.0f} s"
        )
    for backend in results["backends"]:
        print()
        print(render(backend))
    if "api" in results:
        print()
        print(_bench_api.render_api(results["api"]))
    if "sdk" in results:
        print()
        print(_bench_sdk.render(results["sdk"]))
    return 0


def _print_sdk(results: dict[str, Any], args: argparse.Namespace) -> int:
    """Print the SDK section alone (`--only sdk`)."""
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    m, c = results["machine"], results["sdk"]["config"]
    print(f"Command: {results['command']}")
    print(
        f"Machine: {m['platform']}, {m['cpus']} CPUs, Python {m['python']}, SQLite {m['sqlite']}, "
        f"SQLAlchemy {m['sqlalchemy']}, aiosqlite {m['aiosqlite']}, "
        f"openai-agents {m['openai-agents']}; sessionstore {m['revision'] or m['sessionstore']}"
    )
    print(
        f"Workload: add_items in batches of {_bench_sdk.BATCH} up to N, {c['single']} one-item "
        f"add_items after them, {c['reads']} warm full reads and {c['tail_reads']} warm "
        f"newest-{_bench_sdk.TAIL} reads, then {c['turns']} turns (add_items of "
        f"{_bench_sdk.TURN} items, then get_items(), on the object that wrote them) a run; "
        f"median of {c['repeat']} runs"
    )
    print()
    print(_bench_sdk.render(results["sdk"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
