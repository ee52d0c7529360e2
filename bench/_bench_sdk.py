"""The SDK section of `bench_peers.py`: `SessionStoreSession` against the SDK's own stores.

What an openai-agents caller gets: every timed call goes through the SDK's `Session`
protocol and returns the items the SDK would hand to its model (decoded dicts), on each
store's own fresh SQLite file:

- sessionstore's `SessionStoreSession` in raw mode (the default), and in context mode
  with a window far above the history (`max_context_tokens`, no compaction: the
  context is built from the overlays, which are empty);
- the SDK's `SQLiteSession` (stdlib sqlite3 in a worker thread), `AsyncSQLiteSession`
  (aiosqlite; when the installed SDK has it) and `SQLAlchemySession` (SQLAlchemy async on
  aiosqlite).

The workload is an agent's run cycled: a user request, an assistant `message`, a
`function_call` and its `function_call_output`, built before anything is timed, in two
sizes: small (about 225 bytes of JSON an item) and large (about 800). For each history
size N and item size, run by run (every store once in each run, the order rotated):

1. `add_items` in batches of 100 up to N items, on a fresh session (ms an item);
2. the first `get_items()` and `get_items(limit=50)`, each on a fresh store object and
   session object (a process that resumes the session: its own connection or engine);
3. warm `get_items()` and `get_items(limit=50)` on the session that wrote the items;
4. `add_items` of one item a call, `--sdk-single` items after the N (ms an item);
5. `--sdk-turns` turns of an agent that keeps its session object: `add_items` of a turn's
   4 items, then `get_items()` (ms a turn; no goal of the issue names it).

Each figure is the median over the runs; the ratio is sessionstore's to the best SDK
store's (the lowest median), in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import comma_list, timed_turn
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sessionstore import SessionStore, migrate
from sessionstore.integrations.openai_agents import SessionStoreSession

try:
    from agents import SQLiteSession
    from agents.extensions.memory import SQLAlchemySession
except ImportError as exc:  # pragma: no cover - a hint for a missing extra
    raise SystemExit(
        f'the SDK benchmark needs openai-agents: pip install -e ".[bench]" ({exc})'
    ) from None
try:
    from agents.extensions.memory import AsyncSQLiteSession
except ImportError:  # pragma: no cover - older SDKs have no AsyncSQLiteSession
    AsyncSQLiteSession = None

BATCH = 100
TAIL = 50
CONTEXT_WINDOW = 100_000_000
"""The context mode's window: far above any history here, so nothing is compacted."""
TURN = 4
"""Items a turn adds (a request, a message, a call and its output): the `turn` operation."""
GOALS: dict[str, float | None] = {
    "add_batch": 1.0,
    "add_one": 0.8,
    "first_all": 1.0,
    "warm_all": 1.0,
    "first_tail": 1.0,
    "warm_tail": 1.0,
    "turn": None,
}
"""The issue's goals: sessionstore (raw mode) / the best SDK store at most this (None: the
issue names no goal for the operation)."""
OPERATIONS = {
    "add_batch": (f"add_items, batches of {BATCH}", "ms/item"),
    "add_one": ("add_items, 1 item a call", "ms/item"),
    "first_all": ("get_items(), first call", "ms"),
    "warm_all": ("get_items(), warm", "ms"),
    "first_tail": (f"get_items(limit={TAIL}), first call", "ms"),
    "warm_tail": (f"get_items(limit={TAIL}), warm", "ms"),
    "turn": (f"add_items of a turn ({TURN} items), then get_items()", "ms"),
}
SIZES = {"small": (190, 85, 70, 165), "large": (770, 660, 660, 740)}
"""Item sizes: the characters of free text in a user request, an assistant message, a
call's command and a call's output (about 225 and 800 bytes of JSON an item)."""


# ── workload ────────────────────────────────────────────────────────────────────


def _text(words: str, length: int) -> str:
    """Return `words` repeated (space-separated) and cut to `length` characters."""
    return " ".join([words] * (length // (len(words) + 1) + 1))[:length]


def make_items(count: int, size: str) -> list[dict[str, Any]]:
    """Return `count` SDK items: user request, assistant message, call, output, cycled."""
    user, said, command, output = SIZES[size]
    items: list[dict[str, Any]] = []
    for n in range(count):
        k, step = divmod(n, 4)
        module = f"pkg/module_{k % 37}.py"
        if step == 0:
            text = f"Step {k}: test_case_{k} fails after the refactor of {module}. Fix it."
            items.append({"role": "user", "content": _text(text, user)})
        elif step == 1:
            text = f"I'll run the tests of {module} first."
            part = {"type": "output_text", "text": _text(text, said), "annotations": []}
            items.append(
                {
                    "id": f"msg_{k:08d}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [part],
                }
            )
        elif step == 2:
            run = f"pytest tests/test_module_{k % 37}.py -x -q -k case_{k} &&"
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{k:08d}",
                    "call_id": f"call_{k:08d}",
                    "name": "bash",
                    "arguments": json.dumps({"command": _text(run, command)}),
                    "status": "completed",
                }
            )
        else:
            line = f"tests/test_module_{k % 37}.py::test_case_{k} PASSED\n"
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": f"call_{k:08d}",
                    "output": _text(line, output),
                }
            )
    return items


def mean_item_bytes(size: str) -> int:
    return round(statistics.mean(len(json.dumps(item)) for item in make_items(400, size)))


# ── the stores ──────────────────────────────────────────────────────────────────


class Store:
    """One store: opens session objects on its own SQLite file."""

    name: str
    label: str
    ours = False

    def __init__(self, directory: Path) -> None:
        self.path = directory / f"{self.name}.db"
        self.url = f"sqlite+aiosqlite:///{self.path}"

    async def open(self) -> None:
        """Create what the store needs before timing."""

    async def close(self) -> None:
        """Release what `open` made."""

    async def session(self, session_id: str) -> Any:
        """A session object on the store's shared connection or engine."""
        raise NotImplementedError

    async def fresh(self, session_id: str) -> tuple[Any, Callable[[], Awaitable[None]]]:
        """A session object with its own connection or engine, and how to close it."""
        raise NotImplementedError


class Ours(Store):
    name = "sessionstore"
    label = "SessionStoreSession"
    ours = True
    context: int | None = None

    async def open(self) -> None:
        await migrate.upgrade(self.url)
        self._store = SessionStore.from_url(self.url)

    async def close(self) -> None:
        await self._store.close()

    def _on(self, store: SessionStore, session_id: str) -> SessionStoreSession:
        return SessionStoreSession(
            session_id, store.for_tenant("bench", "bench"), max_context_tokens=self.context
        )

    async def session(self, session_id: str) -> Any:
        return self._on(self._store, session_id)

    async def fresh(self, session_id: str) -> tuple[Any, Callable[[], Awaitable[None]]]:
        store = SessionStore.from_url(self.url)
        return self._on(store, session_id), store.close


class OursContext(Ours):
    name = "sessionstore_context"
    label = "SessionStoreSession (context mode)"
    context = CONTEXT_WINDOW


class SdkSQLite(Store):
    name = "sqlite_session"
    label = "SQLiteSession"

    async def open(self) -> None:
        self._open: list[Any] = []

    async def close(self) -> None:
        for session in self._open:
            session.close()

    async def session(self, session_id: str) -> Any:
        session = SQLiteSession(session_id, self.path)
        self._open.append(session)
        return session

    async def fresh(self, session_id: str) -> tuple[Any, Callable[[], Awaitable[None]]]:
        session = SQLiteSession(session_id, self.path)

        async def close() -> None:
            session.close()

        return session, close


class SdkAsyncSQLite(Store):
    name = "async_sqlite_session"
    label = "AsyncSQLiteSession"

    async def open(self) -> None:
        self._open: list[Any] = []

    async def close(self) -> None:
        for session in self._open:
            await session.close()

    async def session(self, session_id: str) -> Any:
        assert AsyncSQLiteSession is not None
        session = AsyncSQLiteSession(session_id, self.path)
        self._open.append(session)
        return session

    async def fresh(self, session_id: str) -> tuple[Any, Callable[[], Awaitable[None]]]:
        assert AsyncSQLiteSession is not None
        session = AsyncSQLiteSession(session_id, self.path)
        return session, session.close


class SdkSQLAlchemy(Store):
    name = "sqlalchemy_session"
    label = "SQLAlchemySession"

    async def open(self) -> None:
        self._engine: AsyncEngine = create_async_engine(self.url)

    async def close(self) -> None:
        await self._engine.dispose()

    async def session(self, session_id: str) -> Any:
        return SQLAlchemySession(session_id, engine=self._engine, create_tables=True)

    async def fresh(self, session_id: str) -> tuple[Any, Callable[[], Awaitable[None]]]:
        engine = create_async_engine(self.url)
        return SQLAlchemySession(session_id, engine=engine, create_tables=True), engine.dispose


def store_classes(context: bool) -> list[type[Store]]:
    classes: list[type[Store]] = [Ours]
    if context:
        classes.append(OursContext)
    classes.append(SdkSQLite)
    if AsyncSQLiteSession is not None:
        classes.append(SdkAsyncSQLite)
    classes.append(SdkSQLAlchemy)
    return classes


# ── measuring ───────────────────────────────────────────────────────────────────


@dataclass
class Case:
    """The figures of one history size and item size: runs by operation and store."""

    n: int
    size: str
    item_bytes: int
    runs: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, op: str, store: Store, value: float) -> None:
        self.runs.setdefault(op, {}).setdefault(store.name, []).append(value)


async def _check(items: Sequence[Any], expected: int, store: Store, what: str) -> None:
    # SessionStoreSession's window starts at a turn: up to 3 items fewer than the limit.
    if not (len(items) == expected or (store.ours and expected - 4 < len(items) < expected)):
        raise RuntimeError(f"{store.label} {what}: {len(items)} items, expected {expected}")


async def one_run(
    store: Store, case: Case, rep: int, items: list[dict[str, Any]], args: argparse.Namespace
) -> None:
    """Time every operation once on `store`, on a fresh session of `case.n` items."""
    session_id = f"n{case.n}-{case.size}-{rep}"
    session = await store.session(session_id)
    batches = [items[i : i + BATCH] for i in range(0, case.n, BATCH)]

    async def add_batches() -> None:
        for batch in batches:
            await session.add_items(batch)

    case.add("add_batch", store, await timed_turn(add_batches) * 1000 / case.n)
    for op, limit in (("first_all", None), ("first_tail", TAIL)):
        fresh, close = await store.fresh(session_id)
        got: list[Any] = []

        async def first(
            fresh: Any = fresh, limit: int | None = limit, got: list[Any] = got
        ) -> None:
            got.extend(await fresh.get_items(limit=limit))

        case.add(op, store, await timed_turn(first) * 1000)
        await close()
        await _check(got, case.n if limit is None else limit, store, op)
    for op, limit, count in (
        ("warm_all", None, args.sdk_reads),
        ("warm_tail", TAIL, args.sdk_tail_reads),
    ):
        await session.get_items(limit=limit)  # this object's first read: not a warm one

        async def warm(limit: int | None = limit, count: int = count) -> None:
            for _ in range(count):
                await session.get_items(limit=limit)

        case.add(op, store, await timed_turn(warm) * 1000 / count)
    extra = make_items(case.n + args.sdk_single, case.size)[case.n :]

    async def add_one() -> None:
        for item in extra:
            await session.add_items([item])

    case.add("add_one", store, await timed_turn(add_one) * 1000 / len(extra))
    await _check(await session.get_items(), case.n + len(extra), store, "after add_one")
    # An agent's turn on a session object it keeps: what it wrote, then the next read.
    written = case.n + len(extra)
    turns = make_items(written + TURN * args.sdk_turns, case.size)[written:]

    async def turn() -> None:
        for start in range(0, len(turns), TURN):
            await session.add_items(turns[start : start + TURN])
            await session.get_items()

    case.add("turn", store, await timed_turn(turn) * 1000 / args.sdk_turns)


async def measure_case(
    n: int, size: str, classes: Sequence[type[Store]], args: argparse.Namespace
) -> Case:
    case = Case(n, size, mean_item_bytes(size))
    items = make_items(n, size)
    directory = Path(tempfile.mkdtemp(prefix="sessionstore_sdk_"))
    stores = [cls(directory) for cls in classes]
    try:
        for store in stores:
            await store.open()
            warm = await store.session("warm-up")  # tables, connections, statement caches
            await warm.add_items(make_items(8, size))
            await warm.get_items()
            await warm.get_items(limit=TAIL)
        for rep in range(args.repeat):
            print(f"  [sdk N={n:,} {size}] run {rep + 1}/{args.repeat}", file=_stderr())
            order = stores[rep % len(stores) :] + stores[: rep % len(stores)]
            for store in order:
                await one_run(store, case, rep, items, args)
    finally:
        for store in stores:
            await store.close()
        shutil.rmtree(directory, ignore_errors=True)
    return case


def _stderr() -> Any:
    import sys

    return sys.stderr


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run every case (history size by item size) and return the figures and ratios."""
    classes = store_classes(args.sdk_context)
    cases = []
    for n in args.sdk_sizes:
        for size in args.sdk_item_sizes:
            cases.append(summary(await measure_case(n, size, classes, args), classes))
    return {
        "stores": {cls.name: cls.label for cls in classes},
        "config": {
            "sizes": args.sdk_sizes,
            "item_sizes": args.sdk_item_sizes,
            "single": args.sdk_single,
            "reads": args.sdk_reads,
            "tail_reads": args.sdk_tail_reads,
            "turns": args.sdk_turns,
            "repeat": args.repeat,
        },
        "cases": cases,
    }


def summary(case: Case, classes: Sequence[type[Store]]) -> dict[str, Any]:
    """Medians, the best SDK store and the ratios of one case."""
    peers = [cls.name for cls in classes if not cls.ours]
    operations = []
    for op, (label, unit) in OPERATIONS.items():
        runs = case.runs[op]
        medians = {name: statistics.median(values) for name, values in runs.items()}
        best = min(peers, key=lambda name: medians[name])
        ratios = {cls.name: medians[cls.name] / medians[best] for cls in classes if cls.ours}
        operations.append(
            {
                "name": op,
                "label": label,
                "unit": unit,
                "medians": medians,
                "runs": runs,
                "best": best,
                "ratios": ratios,
                "goal": GOALS[op],
                "met": None if GOALS[op] is None else ratios[Ours.name] <= GOALS[op],
            }
        )
    return {"n": case.n, "size": case.size, "item_bytes": case.item_bytes, "operations": operations}


# ── output ──────────────────────────────────────────────────────────────────────


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def render(result: dict[str, Any]) -> str:
    """Markdown tables: one a case, each store's median and the ratios to the best."""
    stores: dict[str, str] = result["stores"]
    ours = [name for name in stores if name.startswith(Ours.name)]
    lines: list[str] = []
    for case in result["cases"]:
        header = ["operation", "unit", *stores.values(), "best SDK store"]
        header += [f"{stores[name]} / best" for name in ours] + ["goal", "met?"]
        rows = [header]
        for op in case["operations"]:
            row = [op["label"], op["unit"], *(_fmt(op["medians"][name]) for name in stores)]
            row.append(stores[op["best"]])
            row += [f"{op['ratios'][name]:.2f}x" for name in ours]
            if op["goal"] is None:
                row += ["-", "-"]
            else:
                row += [f"≤ {op['goal']}x", "met" if op["met"] else "**no**"]
            rows.append(row)
        title = (
            f"SDK sessions, N = {case['n']:,} items, {case['size']} items "
            f"({case['item_bytes']} bytes of JSON on average), SQLite file (medians):"
        )
        lines += ["", title, "", *_table(rows)]
    return "\n".join(lines).lstrip("\n")


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(row: list[str]) -> str:
        cells = [
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join(
        "-" * (w + 2) if i < 2 else "-" * (w + 1) + ":" for i, w in enumerate(widths)
    )
    return [line(rows[0]), rule + "|", *(line(row) for row in rows[1:])]


# ── options ─────────────────────────────────────────────────────────────────────


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The SDK section's options (`--sdk-...`), on `bench_peers.py`'s parser."""
    group = parser.add_argument_group("SDK sessions (--only sdk)")
    group.add_argument(
        "--sdk-sizes", type=comma_list(int), help="history sizes N, comma-separated (5000,10000)"
    )
    group.add_argument(
        "--sdk-item-sizes", type=comma_list(str), default=["small", "large"], help="small,large"
    )
    group.add_argument("--sdk-single", type=int, help="one-item add_items calls a run (500)")
    group.add_argument("--sdk-reads", type=int, help="warm get_items() calls a run (5)")
    group.add_argument("--sdk-tail-reads", type=int, help=f"warm get_items(limit={TAIL}) (50)")
    group.add_argument(
        "--sdk-turns",
        type=int,
        help=f"turns a run: add_items of {TURN} items, then get_items(), on one object (5)",
    )
    group.add_argument(
        "--sdk-context",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time SessionStoreSession in context mode (no compaction)",
    )


def fill_defaults(args: argparse.Namespace) -> None:
    """Fill the SDK options left out, smaller with `--quick`."""
    quick = {
        "sdk_sizes": [1_000],
        "sdk_single": 100,
        "sdk_reads": 2,
        "sdk_tail_reads": 10,
        "sdk_turns": 2,
    }
    full = {
        "sdk_sizes": [5_000, 10_000],
        "sdk_single": 500,
        "sdk_reads": 5,
        "sdk_tail_reads": 50,
        "sdk_turns": 5,
    }
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for size in args.sdk_item_sizes:
        if size not in SIZES:
            raise SystemExit(f"--sdk-item-sizes: {size!r} is not one of {', '.join(SIZES)}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure the SDK section (its own event loop) and return its figures."""
    fill_defaults(args)
    return asyncio.run(measure(args))
