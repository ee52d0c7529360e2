"""How long a command takes to start: `sessions list`, `show`, `context`, ... against bare Python.

A command that opens a store pays for its imports before it reads a row, and on a
20-session file the imports are nearly all of it. This script builds a SQLite file of
`--sessions` small sessions (through the public API), then times, as subprocesses,
interleaved run by run, median of `--repeat` runs (wall clock, and the child's CPU time,
steadier than the wall clock on a shared machine):

- `python -c pass` (the interpreter's own start), `python -c "import sqlalchemy"`
  (the floor of any command that queries through SQLAlchemy), the import of every
  third-party library a command reading through an async engine needs (SQLAlchemy's
  asyncio extension, which loads its ORM, aiosqlite, pydantic, click, rich's tables), and
  of those a command reading a SQLite file needs (SQLAlchemy's core, sqlite3, pydantic,
  click, rich's tables: its store makes no async engine), and of those `sessions list`
  needs on a SQLite file, where it reads without the store (pydantic's models, sqlite3,
  click, rich's tables);
- `python -m sessionstore sessions list` and `python -m sessionstore context SESSION`;
- `python -m sessionstore context DEMO --budget 32000`: the session `sessionstore demo`
  stores in a file of its own (12 loops, 563 messages, compacted, with a digest), a read
  that loads blocks, a digest and raw turns;
- `python -m sessionstore sessions show DEMO`: that session, its loops and its usage;
- `python -m sessionstore export DEMO`: that session's raw history as one JSON document;
- `python -m sessionstore audit DEMO`, and with `--html -`: that session's audit, as a
  table and as the web page of every overlay after every compaction;
- `python -m sessionstore search pytest` on the demo's file: the words' best 20 matches
  (the warm-up run brings the index up to date, so the timed runs find it current, as
  every search after the first does until more messages are appended);
- `python -m sessionstore --help` (imports no library code).

It prints each median and its ratio to `python -c pass` and to `import sqlalchemy`,
then the modules that cost most in one `python -X importtime` run of each command
(cumulative microseconds, the slowest top-level imports first).

With `--baseline DIR` (another source tree, such as an older commit's `git archive`), the
commands of that tree (`--help`, `sessions list`, `sessions show`, both `context`s,
`export`, both `audit`s and `search`) are timed in the same runs, for a before / after in one run.

    python bench/bench_startup.py
    python bench/bench_startup.py --repeat 15 --top 15
    git archive "$OLD_COMMIT" sessionstore migrations | tar -x -C ../old
    python bench/bench_startup.py --baseline ../old
    python bench/bench_startup.py --json > startup.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import fmt, log, machine_info, source_tree, tree_environment

from sessionstore import AssistantMessage, SessionStore, UserMessage

ROOT = Path(__file__).resolve().parent.parent


async def _populate(url: str, sessions: int) -> str:
    """Create `sessions` sessions of one loop and two messages; return the last one's id."""
    async with SessionStore.from_url(url) as store:
        await store.upgrade()
        last = ""
        for index in range(sessions):
            session = await store.create_session(
                app_name="bench", user_id="startup", title=f"Session {index}"
            )
            await store.start_loop(session.id)
            await store.append_messages(
                session.id,
                [
                    UserMessage(content=f"Question {index}: what changed?"),
                    AssistantMessage(content=f"Answer {index}: nothing yet."),
                ],
            )
            last = session.id
        return last


_LIBRARIES = "import aiosqlite, click, pydantic, rich.table, sqlalchemy.ext.asyncio"
"""The third-party imports of a command that reads through an async engine (PostgreSQL)."""

_SQLITE_LIBRARIES = "import click, pydantic, rich.table, sqlalchemy, sqlite3"
"""The third-party imports a command that reads a SQLite file cannot do without: its store
runs on the stdlib driver and makes no async engine (no asyncio extension, ORM or aiosqlite)."""

_LISTING_LIBRARIES = "import click, rich.table, sqlite3; from pydantic import BaseModel"
"""The third-party imports of `sessions list` on a SQLite file: it reads without SQLAlchemy."""

Command = tuple[list[str], dict[str, str]]
"""A command line and the environment it runs in."""


def _demo(url: str) -> str:
    """Store the demo's session in the file at `url` (`sessionstore demo`); return its id."""
    done = subprocess.run(
        [sys.executable, "-m", "sessionstore", "--url", url, "demo", "--json"],
        env=tree_environment(ROOT),
        check=True,
        capture_output=True,
        text=True,
    )
    session_id: str = json.loads(done.stdout)["session_id"]
    return session_id


_CONTEXTS = ("sessionstore context SESSION", "sessionstore context DEMO")
_FILE_READS = (
    "sessionstore sessions list",
    "sessionstore sessions show DEMO",
    *_CONTEXTS,
    "sessionstore export DEMO",
    "sessionstore audit DEMO",
    "sessionstore audit DEMO --html -",
    "sessionstore search pytest",
)
"""The commands that read a SQLite file without SQLAlchemy."""


def _commands(
    url: str, session_id: str, demo: tuple[str, str], baseline: Path | None
) -> dict[str, Command]:
    python = sys.executable
    cli = [python, "-m", "sessionstore", "--url", url]
    env = tree_environment(ROOT)
    commands = {
        "python -c pass": ([python, "-c", "pass"], env),
        "python -c 'import sqlalchemy'": ([python, "-c", "import sqlalchemy"], env),
        "python -c 'import <the libraries>'": ([python, "-c", _LIBRARIES], env),
        "python -c 'import <the SQLite libraries>'": ([python, "-c", _SQLITE_LIBRARIES], env),
        "python -c 'import <the listing libraries>'": ([python, "-c", _LISTING_LIBRARIES], env),
        "sessionstore --help": ([*cli, "--help"], env),
        "sessionstore sessions list": ([*cli, "sessions", "list"], env),
        "sessionstore context SESSION": (
            [*cli, "context", session_id, "--budget", "100000"],
            env,
        ),
        "sessionstore context DEMO": (
            [
                python,
                "-m",
                "sessionstore",
                "--url",
                demo[0],
                "context",
                demo[1],
                "--budget",
                "32000",
            ],
            env,
        ),
        "sessionstore sessions show DEMO": (
            [python, "-m", "sessionstore", "--url", demo[0], "sessions", "show", demo[1]],
            env,
        ),
        "sessionstore export DEMO": (
            [python, "-m", "sessionstore", "--url", demo[0], "export", demo[1]],
            env,
        ),
        "sessionstore audit DEMO": (
            [python, "-m", "sessionstore", "--url", demo[0], "audit", demo[1]],
            env,
        ),
        "sessionstore audit DEMO --html -": (
            [python, "-m", "sessionstore", "--url", demo[0], "audit", demo[1], "--html", "-"],
            env,
        ),
        "sessionstore search pytest": (
            [python, "-m", "sessionstore", "--url", demo[0], "search", "pytest"],
            env,
        ),
    }
    if baseline is not None:
        old = tree_environment(baseline)
        for name in ("sessionstore --help", *_FILE_READS):
            commands[f"{name} (baseline)"] = (commands[name][0], old)
    return commands


def _time_once(command: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """One run's wall time and the CPU time (user + system) of the child, in seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _time_all(
    commands: dict[str, Command], cwd: str, repeat: int
) -> dict[str, tuple[float, float]]:
    """Each command's median (wall, CPU) time in s, the commands interleaved run by run."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for command, env in commands.values():  # a warm-up run each: bytecode caches, disk
        _time_once(command, env, cwd)
    for run in range(repeat):
        log(f"run {run + 1}/{repeat}")
        for name, (command, env) in commands.items():
            samples[name].append(_time_once(command, env, cwd))
    return {
        name: (
            statistics.median(wall for wall, _ in values),
            statistics.median(cpu for _, cpu in values),
        )
        for name, values in samples.items()
    }


_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def _top_imports(command: Command, cwd: str, top: int) -> list[tuple[str, int]]:
    """The `top` slowest imports of one run: (module, cumulative µs), nested ones included."""
    (python, *rest), env = command
    done = subprocess.run(
        [python, "-X", "importtime", *rest],
        env=env,
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    rows = [
        (match[4], int(match[2]))
        for match in map(_IMPORT_LINE.match, done.stderr.splitlines())
        if match and not match[4].startswith(("encodings", "site", "runpy"))
    ]
    return sorted(rows, key=lambda row: row[1], reverse=True)[:top]


def _report(medians: dict[str, tuple[float, float]]) -> str:
    bare = medians["python -c pass"][0]
    floor = medians["python -c 'import sqlalchemy'"][0]
    lines = [
        "| command | wall (ms) | CPU (ms) | wall x `python -c pass` | wall x `import sqlalchemy` |",
        "|---|---|---|---|---|",
    ]
    for name, (wall, cpu) in medians.items():
        lines.append(
            f"| `{name}` | {fmt(wall * 1000)} | {fmt(cpu * 1000)} | {wall / bare:.1f}x "
            f"| {wall / floor:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=9, help="timed runs per command")
    parser.add_argument("--top", type=int, default=12, help="imports listed per command")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="another source tree (holding a `sessionstore` package, such as an older "
        "commit's `git archive`) whose commands are timed in the same runs",
    )
    args = parser.parse_args()
    if args.baseline is not None:
        source_tree(args.baseline)
    with tempfile.TemporaryDirectory(prefix="sessionstore-startup-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'sessions.db'}"
        session_id = asyncio.run(_populate(url, args.sessions))
        demo_url = f"sqlite+aiosqlite:///{Path(tmp) / 'demo.db'}"
        demo = (demo_url, _demo(demo_url))
        commands = _commands(url, session_id, demo, args.baseline)
        medians = _time_all(commands, tmp, max(3, args.repeat))
        offenders = {name: _top_imports(commands[name], tmp, args.top) for name in _FILE_READS}
    figures: dict[str, Any] = {
        "machine": machine_info(),
        "sessions": args.sessions,
        "repeat": args.repeat,
        "median_seconds": {
            name: {"wall": wall, "cpu": cpu} for name, (wall, cpu) in medians.items()
        },
        "top_imports_us": offenders,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"Start time, {args.sessions} sessions, median of {args.repeat} interleaved runs\n")
    print(_report(medians))
    for name, rows in offenders.items():
        print(f"\nSlowest imports of `{name}` (cumulative ms, one -X importtime run):")
        for module, micros in rows:
            print(f"  {fmt(micros / 1000):>7}  {module}")


if __name__ == "__main__":
    main()
