"""Where a decoded full read's time goes, phase by phase, next to what the SDK stores do.

Run from a checkout, with the package installed:

    python bench/bench_read_phases.py [--sizes 5000,10000] [--items small,large] [--repeat 15]

Issue 20 asks a full read with every message decoded (`get_messages`) and the SDK
adapter's first `get_items()` to cost no more than the OpenAI Agents SDK's stores. Those
read one text column and `json.loads` each row. This splits sessionstore's reads into
their phases, each run alone on the same SQLite file in one process, interleaved run by
run, as the median of `--repeat` runs of *process CPU time* (every thread's; wall time
on a shared machine swings by more than the phases differ):

`get_messages` (SQLite, the store's own statement on the stdlib driver):

- `peer floor`: fetch the payload column, `json.loads` each row (what `SQLiteSession`
  does, with the collector running as it does there);
- `fetch payload` / `fetch 9 columns`: the driver's rows alone, one column or the nine
  a `StoredMessage` needs (id, loop, position, turn, tokens, hash, client id, time, payload);
- `json.loads` / `from_json` / `validate_json`: parsing the fetched payloads, to dicts
  (stdlib, pydantic-core) or to the message models (the store's validator of stored
  payloads), the collector paused as the store pauses it;
- `records`: `decoded_records` over the fetched rows (the parse and the `StoredMessage`
  wrapper); `wrapper` is `records` less `validate_json`; `fetch + records`: both, on
  fresh rows each run, as the store runs them;
- `get_messages`: the public call end to end (its worker thread's CPU included).

SDK adapter's first read (a fresh `SessionStoreSession`; its items kept in the payloads):

- `peer floor`: the item texts (extracted once before timing) as the SDK stores hold
  them, each `json.loads`;
- `keys` / `payload` / `json_extract`: the chain statement's rows with ids and hashes
  only (the warm read's), the whole payload, and the kept string extracted by SQLite
  (the first read's);
- `decode kept`: the adapter's one `from_json` of all kept texts;
- `first get_items`: the call end to end on a fresh store.

Ratios are to each section's `peer floor`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _bench_api import api_items
from _bench_sdk import make_items
from pydantic_core import from_json
from sqlalchemy.dialects import sqlite as sqlite_dialect

from sessionstore import SessionStore, migrate
from sessionstore._sqlite_read import sqlite_utc
from sessionstore.integrations._item_json import decoded
from sessionstore.integrations.openai_agents import _JSON_PATH, SessionStoreSession
from sessionstore.models._batch import decoded_records, paused_gc
from sessionstore.models._stored_json import shared_validator
from sessionstore.store import _statements as sql
from sessionstore.store._payload_reads import (
    _chain_select,
    select_chain_keys,
    select_chain_strings,
)
from sessionstore.store._plain import driver_values

BATCH = 100
TENANT = ("bench", "bench")


def cpu_median(work: Callable[[], Any], results: dict[str, list[float]], name: str) -> None:
    """Run `work` once after a full collection; add its process CPU time (ms) to `results`."""
    gc.collect()
    start = time.process_time()
    done = work()
    results.setdefault(name, []).append((time.process_time() - start) * 1000)
    del done


async def cpu_median_async(
    work: Callable[[], Awaitable[Any]], results: dict[str, list[float]], name: str
) -> None:
    """`cpu_median` of a coroutine function: one awaited call after a full collection."""
    gc.collect()
    start = time.process_time()
    done = await work()
    results.setdefault(name, []).append((time.process_time() - start) * 1000)
    del done


async def _api_file(path: Path, n: int, size: str) -> str:
    url = f"sqlite+aiosqlite:///{path}"
    await migrate.upgrade(url)
    store = SessionStore.from_url(url)
    try:
        session = await store.create_session(app_name="bench", user_id="bench")
        items = api_items(n, size)
        for at in range(0, n, BATCH):
            await store.append_messages(session.id, [i.message for i in items[at : at + BATCH]])
        return session.id
    finally:
        await store.close()


def _driver_sql(statement: Any, params: dict[str, Any]) -> tuple[str, list[Any]]:
    return driver_values(sqlite_dialect.dialect(), statement, params)


async def api_phases(path: Path, session_id: str, repeat: int) -> dict[str, list[float]]:
    """Time each phase of `get_messages` of the session's active loop (see the docstring)."""
    conn = sqlite3.connect(path, isolation_level=None)
    statement = sql.select_loop_messages_by_id(True, False)
    columns_sql, values = _driver_sql(statement, {"sid": session_id, "lid": None, "n": None})
    payload_sql = (
        "SELECT payload FROM sessionstore_messages WHERE session_id = ? ORDER BY loop_id, position"
    )
    rows = conn.execute(columns_sql, values).fetchall()
    texts = [row[-1] for row in rows]
    validate = shared_validator().validate_json

    def peer() -> Any:
        return [json.loads(row[0]) for row in conn.execute(payload_sql, (session_id,))]

    def paused(work: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with paused_gc():
                return work()

        return run

    phases: dict[str, Callable[[], Any]] = {
        "peer floor": peer,
        "fetch payload": lambda: conn.execute(payload_sql, (session_id,)).fetchall(),
        "fetch 9 columns": lambda: conn.execute(columns_sql, values).fetchall(),
        "json.loads": paused(lambda: [json.loads(t) for t in texts]),
        "from_json": paused(lambda: [from_json(t) for t in texts]),
        "validate_json": paused(lambda: [validate(t) for t in texts]),
        "records": paused(lambda: decoded_records(rows, session_id, sqlite_utc)),
        "fetch + records": paused(
            lambda: decoded_records(
                conn.execute(columns_sql, values).fetchall(), session_id, sqlite_utc
            )
        ),
    }
    results: dict[str, list[float]] = {}
    store = SessionStore.from_url(f"sqlite+aiosqlite:///{path}")
    try:
        await store.get_messages(session_id)
        for _ in range(repeat):
            for name, work in phases.items():
                cpu_median(work, results, name)
            await cpu_median_async(lambda: store.get_messages(session_id), results, "get_messages")
    finally:
        await store.close()
        conn.close()
    return results


async def _sdk_file(path: Path, n: int, size: str) -> None:
    url = f"sqlite+aiosqlite:///{path}"
    await migrate.upgrade(url)
    store = SessionStore.from_url(url)
    try:
        session = SessionStoreSession("s", store.for_tenant(*TENANT))
        items = make_items(n, size)
        for at in range(0, n, BATCH):
            await session.add_items(items[at : at + BATCH])
    finally:
        await store.close()


async def sdk_phases(path: Path, repeat: int) -> dict[str, list[float]]:
    """Time each phase of the adapter's first `get_items()` (see the docstring)."""
    conn = sqlite3.connect(path, isolation_level=None)
    app, user = TENANT
    session_id = "s"
    params = {"sid": session_id, "app": app, "user": user}
    strings_sql, values = _driver_sql(select_chain_strings("sqlite", _JSON_PATH, False), params)
    keys_sql, _ = _driver_sql(select_chain_keys("sqlite", False), params)
    columns = (sql.messages.c.payload, sql.messages.c.id, sql.messages.c.content_hash)
    payload_sql, _ = _driver_sql(_chain_select(False, *columns), params)
    kept = [row[0] for row in conn.execute(strings_sql, values)]
    items = [json.dumps(item) for text in kept for item in json.loads(text)]

    phases: dict[str, Callable[[], Any]] = {
        "peer floor": lambda: [json.loads(text) for text in items],
        "keys": lambda: conn.execute(keys_sql, values).fetchall(),
        "payload": lambda: conn.execute(payload_sql, values).fetchall(),
        "json_extract": lambda: conn.execute(strings_sql, values).fetchall(),
        "decode kept": lambda: decoded(kept),
    }
    url = f"sqlite+aiosqlite:///{path}"
    results: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, work in phases.items():
            cpu_median(work, results, name)
        store = SessionStore.from_url(url)
        try:
            session = SessionStoreSession(session_id, store.for_tenant(*TENANT))
            await cpu_median_async(session.get_items, results, "first get_items")
        finally:
            await store.close()
    conn.close()
    return results


def render(title: str, results: dict[str, list[float]]) -> None:
    floor = statistics.median(results["peer floor"])
    print(f"\n{title} (process CPU ms, medians):\n")
    print("| phase | ms | / peer floor |")
    print("|---|---:|---:|")
    medians = {name: statistics.median(values) for name, values in results.items()}
    if "records" in medians:
        medians["wrapper (records - validate_json)"] = medians["records"] - medians["validate_json"]
    for name, value in medians.items():
        print(f"| {name} | {value:.2f} | {value / floor:.2f}x |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,10000", help="history sizes, comma-separated")
    parser.add_argument("--items", default="small,large", help="item sizes: small, large")
    parser.add_argument("--repeat", type=int, default=15, help="runs a phase (medians)")
    parser.add_argument("--no-sdk", action="store_true", help="skip the SDK adapter's phases")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory() as directory:
        for n in (int(size) for size in args.sizes.split(",")):
            for size in args.items.split(","):
                path = Path(directory) / f"api-{size}-{n}.db"
                session_id = await _api_file(path, n, size)
                results = await api_phases(path, session_id, args.repeat)
                render(f"get_messages, N = {n:,}, {size} items", results)
                if args.no_sdk:
                    continue
                path = Path(directory) / f"sdk-{size}-{n}.db"
                await _sdk_file(path, n, size)
                render(
                    f"SDK first get_items(), N = {n:,}, {size} items",
                    await sdk_phases(path, args.repeat),
                )


if __name__ == "__main__":
    asyncio.run(main())
