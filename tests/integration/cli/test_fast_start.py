"""`sessionstore --help` and `--version` import click and nothing heavy; a command, what it uses.

The group lists its commands from `COMMANDS` and imports a command's module only to run
it, so the top-level help stays fast; these tests guard what it imports and keep each
listed summary equal to the command's own help. A command that reads (`sessions list`,
`sessions show`, `context`, `export`, `audit`) runs in a fresh interpreter against a real
SQLite file, and must not have imported what only migrating, compacting or converting
needs, nor SQLAlchemy: each reads the file on the standard library's driver
(`bench/bench_startup.py` times the difference).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from sessionstore import AssistantMessage, SessionStore, UserMessage
from sessionstore._sqlite_read import shipped_head
from sessionstore.cli import COMMANDS, main

HEAVY = (
    "sqlalchemy",
    "alembic",
    "asyncpg",
    "aiosqlite",
    "pydantic",
    "rich",
    "httpx",
    "sessionstore.store",
    "sessionstore.models",
    "sessionstore.config",
    "sessionstore._compaction",
    "sessionstore._context",
)

_PROBE = """
import io, json, sys
from contextlib import redirect_stdout
from sessionstore.cli import main
with redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:], prog_name="sessionstore")
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def _modules_imported_by(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=True
    ).stdout
    modules: list[str] = json.loads(out.splitlines()[-1])
    return modules


NOT_FOR_READING = (
    "alembic",  # migrating: the schema check reads the version row itself
    "httpx",  # the OpenAI-compatible summarizer
    "jinja2",  # audit --html
    "rich.progress",  # the bars of import, purge and demo
    # compacting (a built context may read a stored digest's headings: `_handoff` only)
    "sessionstore.summarizers._extractive",
    "sessionstore.summarizers._facts",
    "sessionstore.summarizers._fit",
    "sessionstore.summarizers._openai_compatible",
    "sessionstore.strategies._compress",
    "sessionstore.strategies._default",
    "sessionstore.strategies._summarizing",
    "sessionstore.formats._anthropic",  # converting from and to the providers' formats
    "sessionstore.formats._responses",
    "sessionstore.formats._import",
    "sessionstore.formats._export",
    "sessionstore._compaction",
    "sessionstore._audit",
    "sessionstore.integrations",
    # a store on SQLite: the PostgreSQL dialect (JSONB, an index's `postgresql_where`)
    "sqlalchemy.dialects.postgresql",
    # a store on a SQLite file: its async engine, made only when asked for (`SqliteFile`)
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.orm",
    "aiosqlite",
)
"""What a command that only reads (`sessions list`, `sessions show`, `context`) must not import."""

STORE_PATHS_NOT_FOR_READING = {
    "sessionstore.store._pg_append",  # PostgreSQL's one-statement append
    "sessionstore.store._search_vector",  # the PostgreSQL search column of an insert
    "sessionstore.store._search",
    "sessionstore.store._verify",
    "sessionstore.store._payload_reads",
}
"""The store's modules of other paths, imported where they run (whole names: not prefixes)."""

NOT_FOR_LISTING = (
    # building a context: the loader, pairing and trimming code
    "sessionstore._overlay",
    "sessionstore._trim",
    "sessionstore._fit_units",
    "sessionstore._context",
    "sessionstore.strategies._passes",
    "sessionstore.summarizers",
)
"""What `sessions list` must not import either: it builds no context."""

_READ_PROBE = """
import json, sys
from sessionstore.cli import main
try:
    main(sys.argv[1:], prog_name="sessionstore")
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A migrated SQLite file with one session of one loop: (URL, session id)."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('start') / 'sessions.db'}"

    async def populate() -> str:
        async with SessionStore.from_url(url) as store:
            await store.upgrade()
            session = await store.create_session(app_name="cli", user_id="ada", title="t")
            await store.start_loop(session.id)
            await store.append_messages(
                session.id, [UserMessage(content="hi"), AssistantMessage(content="hello")]
            )
            return session.id

    return url, asyncio.run(populate())


def _modules_of_a_run(url: str, *args: str) -> tuple[str, list[str]]:
    """Run the command in a fresh interpreter: what it printed, and every module it imported."""
    done = subprocess.run(
        [sys.executable, "-c", _READ_PROBE, "--url", url, *args],
        capture_output=True,
        text=True,
        check=True,
    )
    modules: list[str] = json.loads(done.stderr.splitlines()[-1])
    return done.stdout, modules


@pytest.mark.parametrize(
    "args",
    [
        ("sessions", "list"),
        ("sessions", "list", "--json"),
        ("sessions", "show", "{session}"),
        ("sessions", "show", "{session}", "--json"),
        ("db", "check"),
        ("db", "current", "--json"),
        ("export", "{session}"),
        ("context", "{session}", "--budget", "1000"),
        ("context", "{session}", "--budget", "1000", "--format", "json"),
        ("audit", "{session}"),
        ("audit", "{session}", "--json"),
        ("audit", "{session}", "--html", "-"),
    ],
    ids=" ".join,
)
def test_a_command_that_reads_imports_only_what_it_uses(sqlite_file, args):
    url, session_id = sqlite_file

    out, modules = _modules_of_a_run(url, *(arg.format(session=session_id) for arg in args))

    # It did read the session (or the schema's revision).
    assert session_id[:20] in out or "hello" in out or str(shipped_head()) in out
    its_job = {  # what a command imports because it is the command's work
        "export": ("sessionstore.formats._export",),
        "audit": ("sessionstore._audit", "jinja2")
        if "--html" in args
        else ("sessionstore._audit",),
    }.get(args[0], ())
    assert [
        m
        for m in modules
        if (m == "alembic" or m.startswith(NOT_FOR_READING)) and not m.startswith(its_job)
    ] == []
    assert STORE_PATHS_NOT_FOR_READING.isdisjoint(modules)
    if args[:2] == ("sessions", "list"):
        # The first page of a SQLite file is read without the store (`_sqlite_read`).
        assert [m for m in modules if m.startswith(NOT_FOR_LISTING)] == []
    # A SQLite file is read without the store: a session and a context too (`_sqlite_context`).
    assert [m for m in modules if m.startswith(("sqlalchemy", "sessionstore.store"))] == []


def test_a_context_the_store_reads_loads_sqlalchemy(sqlite_file):
    """The check above can fail: a URL the file read leaves to the store loads SQLAlchemy."""
    url, session_id = sqlite_file
    store_url = url.replace(":///", ":///file:", 1) + "?mode=ro&uri=true"

    out, modules = _modules_of_a_run(store_url, "context", session_id, "--budget", "1000")

    assert "hello" in out
    assert {"sqlalchemy", "sessionstore.store"} <= set(modules)


def test_the_probe_sees_a_heavy_import(sqlite_file):
    """The check above can fail: `compact` does load the summarizers and the strategies."""
    url, session_id = sqlite_file

    _, modules = _modules_of_a_run(url, "compact", session_id, "--budget", "1000")

    assert "sessionstore.summarizers._extractive" in modules
    assert "sessionstore._compaction" in modules


def test_the_probe_sees_what_a_context_needs(sqlite_file):
    """`context` builds one: the loader and the trimming code are imported."""
    url, session_id = sqlite_file

    _, modules = _modules_of_a_run(url, "context", session_id, "--budget", "1000")

    assert {"sessionstore._overlay", "sessionstore._trim"} <= set(modules)


def test_the_whole_schema_has_the_partial_indexes_with_both_predicates():
    """The store's tables leave them out (see `schema_metadata`); the compared schema has them."""
    code = (
        "import json, sys\n"
        "from sessionstore.store._tables import messages, schema_metadata\n"
        "before = sorted(ix.name for ix in messages.indexes)\n"
        "schema_metadata()\n"
        "after = {ix.name: sorted(ix.dialect_kwargs) for ix in messages.indexes}\n"
        "print(json.dumps([before, after]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    before, after = json.loads(out.stdout)

    partial = {"uq_sessionstore_messages_client_id", "ix_sessionstore_messages_user"}
    assert partial.isdisjoint(before)
    for name in partial:
        assert after[name] == ["postgresql_where", "sqlite_where"]


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("-h",)])
def test_the_top_level_help_and_version_import_nothing_heavy(args):
    modules = _modules_imported_by(*args)

    heavy = [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]
    assert heavy == []
    assert "click" in modules  # the probe did run the group


def test_a_command_imports_what_it_needs_when_it_runs():
    modules = _modules_imported_by("db", "--help")

    assert "sessionstore.cli._db" in modules


def test_import_sessionstore_is_lazy():
    code = "import json, sys, sessionstore; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    modules = json.loads(out.stdout)

    assert [m for m in modules if m.startswith(HEAVY)] == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_summary_is_the_first_sentence_of_the_commands_help(name):
    entry = COMMANDS[name]
    command = getattr(importlib.import_module(entry.module), entry.attribute)

    assert isinstance(command, click.Command)
    assert command.name == name
    assert command.get_short_help_str(limit=1_000) == entry.summary


def test_an_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(main, ["no-such-command"])

    assert result.exit_code == 2
    assert "No such command 'no-such-command'" in result.output
