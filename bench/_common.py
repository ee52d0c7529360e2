"""What the benchmark scripts share: logging, machine info, sizes, figures, a PostgreSQL database.

The scripts run as `python bench/<script>.py`, so they import this module as `_common`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import secrets
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import create_async_engine

from sessionstore import migrate


async def timed_turn(work: Callable[[], Awaitable[Any]]) -> float:
    """Return the seconds `work` takes, after a garbage collection (GC stays on).

    The event loop's next turn is timed with it: what a call leaves to that turn (a worker
    thread's result, held by the loop's last handle and freed there) is the call's cost,
    paid before the caller's next step. A context-mode read of the SDK session left about
    9 ms of freeing there at 5,000 items, which the sections did not count before stop 34.
    """
    gc.collect()
    start = time.perf_counter()
    await work()
    await asyncio.sleep(0)
    return time.perf_counter() - start


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fmt(value: float) -> str:
    """Format a figure with about three significant digits, thousands separated."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def source_revision() -> str | None:
    """Return the checkout's commit (with `+dirty` when sessionstore/ has changes), if any."""
    root = Path(__file__).resolve().parent.parent
    git = ["git", "--no-optional-locks", "-C", str(root)]  # read-only: never touch the index
    try:
        commit = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changes = subprocess.run(
            [*git, "status", "--porcelain", "--", "sessionstore", "migrations"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{commit}+dirty" if changes else commit


def machine_info() -> dict[str, Any]:
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "sqlalchemy": version("sqlalchemy"),
        "pydantic": version("pydantic"),
        "aiosqlite": version("aiosqlite"),
        "asyncpg": version("asyncpg"),
        "sessionstore": version("sessionstore"),
        "revision": source_revision(),
    }


def source_tree(tree: Path) -> Path:
    """`tree`, checked to hold a `sessionstore` package (a baseline such as a `git archive`).

    A missing one is an error: the subprocesses would import the installed package
    instead (an editable install of this checkout), and time this tree twice.
    """
    if not (tree / "sessionstore" / "__init__.py").is_file():
        raise SystemExit(
            f"{tree}: no sessionstore package in it "
            "(make one with `git archive REV sessionstore migrations | tar -x -C DIR`)"
        )
    return tree


def tree_environment(source: Path) -> dict[str, str]:
    """This process's environment with `source` first on the path, for a child that times it.

    Bytecode caches are written (a warm-up run writes them), as an installed package has
    them: with `PYTHONDONTWRITEBYTECODE` set, every run would compile the sources again
    and time that instead. Run the child outside a checkout (`python -m` puts its
    working directory first on the path).
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
    return env


def child_json(script: str, tree: Path, arguments: list[str]) -> Any:
    """Run `script --child ARGUMENTS` with `tree` first on its path; return its stdout's JSON.

    For an A/B of two source trees: each run is a fresh process importing one tree's
    `sessionstore` (and this folder's helpers).
    """
    here = Path(script).resolve()
    source_tree(tree)
    command = [sys.executable, str(here), "--child", *arguments]
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{here.parent}"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def comma_list(kind: Callable[[str], Any], what: str = "values") -> Callable[[str], list[Any]]:
    """An argparse `type` for a comma-separated list of `kind` (`1,000` digits may hold `_`)."""

    def parse(text: str) -> list[Any]:
        try:
            return [kind(part.strip().replace("_", "")) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a comma-separated list of {what}: {text!r}"
            ) from None

    return parse


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of sizes: {text!r}") from None
    if not sizes or any(size < 2 for size in sizes):
        raise argparse.ArgumentTypeError("every size must be at least 2 messages")
    return sorted(set(sizes))


@contextlib.asynccontextmanager
async def postgres_database(admin_url: URL) -> AsyncIterator[tuple[URL, str]]:
    """Create a temporary database beside `admin_url`'s, migrated; drop it at the end."""
    name = f"sessionstore_bench_{secrets.token_hex(6)}"
    admin = create_async_engine(admin_url, isolation_level="AUTOCOMMIT")
    created = False
    try:
        async with admin.connect() as conn:
            version = (await conn.execute(sa.text("SHOW server_version"))).scalar_one()
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            created = True
        log(f"  [postgres] created temporary database {name}")
        url = admin_url.set(database=name)
        await migrate.upgrade(url)
        yield url, str(version)
    finally:
        if created:
            async with admin.connect() as conn:
                await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            log(f"  [postgres] dropped {name}")
        await admin.dispose()
