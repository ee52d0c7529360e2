"""Time the calls an ADK app makes of its session service, against ADK's own services.

Run from a checkout, with the package installed with the `adk` extra:

    python bench/bench_adk.py [--sessions 30] [--runs 2] [--events 30] [--repeat 3] [--json]

Each run fills a fresh SQLite file per service with the same sessions (`--sessions`, over
5 users, each `--runs` runs of `--events` events: a user event, then the agent's, every
event with a `state_delta`), through sessionstore's `SessionStoreSessionService` and
Google ADK's `DatabaseSessionService` (SQLAlchemy async on aiosqlite), ADK's
`InMemorySessionService` beside them for reference. Then it times, per service:

- `list_sessions` of one user's sessions and of every user of the app, on the object that
  wrote them ("kept") and on a new object of the same database ("new"; for the in-memory
  service, the same object: it has no other);
- `get_session` of one session (every event), 20 times;
- `append_event` of a next run's user event, then 3 agent events, on 10 sessions read just
  before: what an agent's turn writes.

Runs are interleaved (the services' order turns each run), medians of `--repeat` runs,
each call's time including the event loop's turn after it (`_common.timed_turn`). The
ratio is sessionstore / `DatabaseSessionService`. Figures and their reading:
docs/benchmarks.md, "ADK session service".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import fmt, log, machine_info, timed_turn

warnings.filterwarnings("ignore")  # ADK's experimental-feature warnings, one per call

from google.adk.events.event import Event  # noqa: E402  # after the warning filter
from google.adk.events.event_actions import EventActions  # noqa: E402
from google.adk.sessions import (  # noqa: E402
    BaseSessionService,
    DatabaseSessionService,
    InMemorySessionService,
)
from google.genai import types  # noqa: E402

from sessionstore import SessionStore, migrate  # noqa: E402
from sessionstore.integrations.adk import SessionStoreSessionService  # noqa: E402

APP = "bench"
USERS = 5
OPERATIONS = {
    "list_user_kept": "list_sessions(user), the object that wrote",
    "list_user_new": "list_sessions(user), a new object",
    "list_app_kept": "list_sessions(every user), the object that wrote",
    "list_app_new": "list_sessions(every user), a new object",
    "get_session": "get_session (every event)",
    "turn": "append_event: a user event and 3 agent events",
}


def event(author: str, run: int, index: int) -> Event:
    text = f"run {run} event {index}: " + "the agent reads pkg/module.py and runs the tests " * 3
    return Event(
        invocation_id=f"inv-{run}",
        author=author,
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text)]
        ),
        actions=EventActions(state_delta={"step": index, f"run_{run % 4}": run}),
    )


class Service:
    """One service kind: how to open it on a directory's database, and a second object."""

    name: str
    label: str

    def __init__(self, directory: Path) -> None:
        self.path = directory / f"{self.name}.db"
        self.url = f"sqlite+aiosqlite:///{self.path}"
        self.closers: list[Callable[[], Awaitable[Any]]] = []

    async def open(self) -> BaseSessionService:
        raise NotImplementedError

    async def close(self) -> None:
        for close in self.closers:
            await close()


class Ours(Service):
    name, label = "sessionstore", "SessionStoreSessionService"
    migrated = False

    async def open(self) -> BaseSessionService:
        if not self.migrated:
            await migrate.upgrade(self.url)
            self.migrated = True
        store = SessionStore.from_url(self.url)
        self.closers.append(store.close)
        return SessionStoreSessionService(store)


class AdkDatabase(Service):
    name, label = "adk_database", "DatabaseSessionService"

    async def open(self) -> BaseSessionService:
        service = DatabaseSessionService(self.url)
        self.closers.append(service.db_engine.dispose)
        return service


class AdkMemory(Service):
    name, label = "adk_memory", "InMemorySessionService"
    kept: BaseSessionService | None = None

    async def open(self) -> BaseSessionService:
        if self.kept is None:
            self.kept = InMemorySessionService()
        return self.kept  # the only object that has the sessions


async def fill(service: BaseSessionService, args: argparse.Namespace) -> list[Any]:
    sessions = []
    for index in range(args.sessions):
        session = await service.create_session(
            app_name=APP, user_id=f"user{index % USERS}", state={"index": index}
        )
        for run in range(args.runs):
            for position in range(args.events):
                author = "user" if position == 0 else "agent"
                await service.append_event(session, event(author, run, position))
        sessions.append(session)
    return sessions


async def one_run(kind: Service, args: argparse.Namespace, runs: dict[str, list[float]]) -> None:
    kept = await kind.open()
    sessions = await fill(kept, args)
    new = await kind.open()
    for op, service, user in (
        ("list_user_kept", kept, "user1"),
        ("list_user_new", new, "user1"),
        ("list_app_kept", kept, None),
        ("list_app_new", new, None),
    ):
        got: list[Any] = []

        async def listing(
            service: BaseSessionService = service, user: str | None = user, got: list[Any] = got
        ) -> None:
            got.append(await service.list_sessions(app_name=APP, user_id=user))

        runs[op].append(await timed_turn(listing) * 1000)
        expected = args.sessions // USERS if user else args.sessions
        assert len(got[0].sessions) == expected, (kind.label, op, len(got[0].sessions))
    picked = sessions[:: max(1, len(sessions) // 20)][:20]

    async def reads() -> None:
        for session in picked:
            await kept.get_session(app_name=APP, user_id=session.user_id, session_id=session.id)

    runs["get_session"].append(await timed_turn(reads) * 1000 / len(picked))
    targets = []
    for session in sessions[:10]:
        fresh = await kept.get_session(app_name=APP, user_id=session.user_id, session_id=session.id)
        assert fresh is not None
        targets.append(fresh)

    async def turns() -> None:
        for session in targets:
            for position in range(4):
                author = "user" if position == 0 else "agent"
                await kept.append_event(session, event(author, args.runs, position))

    runs["turn"].append(await timed_turn(turns) * 1000 / len(targets))


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    kinds: list[type[Service]] = [Ours, AdkDatabase, AdkMemory]
    runs: dict[str, dict[str, list[float]]] = {k.name: {op: [] for op in OPERATIONS} for k in kinds}
    for rep in range(args.repeat):
        order = kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]
        for cls in order:
            log(f"  run {rep + 1}/{args.repeat}: {cls.label}")
            directory = Path(tempfile.mkdtemp(prefix="sessionstore_adk_"))
            kind = cls(directory)
            try:
                await one_run(kind, args, runs[cls.name])
            finally:
                await kind.close()
                shutil.rmtree(directory, ignore_errors=True)
    medians = {
        name: {op: statistics.median(values) for op, values in ops.items()}
        for name, ops in runs.items()
    }
    return {
        "machine": machine_info(),
        "config": vars(args),
        "labels": {k.name: k.label for k in kinds},
        "medians": medians,
        "runs": runs,
    }


def render(result: dict[str, Any]) -> str:
    labels = result["labels"]
    medians = result["medians"]
    config = result["config"]
    lines = [
        f"ADK session services, {config['sessions']} sessions of {USERS} users, "
        f"{config['runs']} runs of {config['events']} events each, SQLite file "
        f"(ms, medians of {config['repeat']} runs):",
        "",
        "| operation | " + " | ".join(labels.values()) + " | ours / DatabaseSessionService |",
        "|---|" + "--:|" * (len(labels) + 1),
    ]
    for op, label in OPERATIONS.items():
        figures = [fmt(medians[name][op]) for name in labels]
        ratio = medians[Ours.name][op] / medians[AdkDatabase.name][op]
        lines.append(f"| {label} | " + " | ".join(figures) + f" | {ratio:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--runs", type=int, default=2, help="runs per session (default: 2)")
    parser.add_argument("--events", type=int, default=30, help="events per run (default: 30)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.sessions < USERS or args.events < 1 or args.runs < 1 or args.repeat < 1:
        parser.error(f"--sessions must be at least {USERS}; --runs, --events, --repeat at least 1")
    result = asyncio.run(measure(args))
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
