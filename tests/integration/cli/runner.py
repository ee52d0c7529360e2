"""Run the command line in-process through click's `CliRunner`, and check through the store.

The tests are plain functions, on SQLite and PostgreSQL: each command runs its own
`asyncio.run()`, and the checks through the store do the same (`with_store`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from click.testing import CliRunner, Result

from sessionstore import SessionStore
from sessionstore._sqlite_read import VERSION_TABLE
from sessionstore.cli import main

T = TypeVar("T")

SMALL = {
    "id": "small-1",
    "source": "hand-written",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calc", "arguments": '{"expr": "2+2"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "4"},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "6."},
    ],
}


def write_jsonl(path: Path, conversations: list[Any]) -> Path:
    lines = [c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) for c in conversations]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def cli(url: str | None, *args: str, input: str | None = None, **kwargs: Any) -> Result:
    prefix = [] if url is None else ["--url", url]
    return CliRunner().invoke(main, [*prefix, *args], input=input, catch_exceptions=False, **kwargs)


def ok(url: str | None, *args: str, **kwargs: Any) -> Result:
    result = cli(url, *args, **kwargs)
    assert result.exit_code == 0, result.output
    return result


def fails(url: str | None, *args: str, **kwargs: Any) -> Result:
    """Run a command that must fail cleanly: non-zero exit, a message, no traceback."""
    result = cli(url, *args, **kwargs)
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    assert result.stderr.strip()
    return result


def json_out(result: Result) -> Any:
    return json.loads(result.stdout)


def with_store(url: str, work: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Return `await work(store, *args)` on a store opened (and closed) for the call."""

    async def run() -> T:
        async with SessionStore.from_url(url) as store:
            return await work(store, *args)

    return asyncio.run(run())


def store_url(path: Path) -> str:
    """A URL of the SQLite file at `path` that the reads without SQLAlchemy leave to the store.

    A `file:` URI: a test runs a command on both URLs to compare the two paths on one file.
    """
    return f"sqlite+aiosqlite:///file:{path}?mode=ro&uri=true"


def both_paths(run: Callable[..., Any], path: Path, *args: str) -> tuple[Any, Any]:
    """The command ARGS through `run` (`cli` or `ok`) on the SQLite file at `path` twice.

    First on its plain URL, which the commands that read without SQLAlchemy read on the
    standard library's driver, then on `store_url`, which they leave to the store.
    """
    fast = run(f"sqlite+aiosqlite:///{path}", *args)
    return fast, run(store_url(path), *args)


def at_revision(source: Path, folder: Path, revision: str = "ffffffffffff") -> Path:
    """A copy of the SQLite file `source` in `folder`, its version row set to `revision`."""
    path = folder / f"at-{revision}.db"
    shutil.copyfile(source, path)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE {VERSION_TABLE} SET version_num = ?", (revision,))
    db.close()
    return path
