"""Traps a newcomer falls into (issue 19, item 5): each one is now the obvious behaviour."""

from __future__ import annotations

import pytest

from sessionstore import (
    CompactionSummaryMessage,
    SchemaError,
    SessionStore,
    compact_session_loops,
)
from sessionstore.errors import StorageError
from tests.conftest import postgres_url
from tests.integration._helpers import SMALL, session_with_loops
from tests.integration.cli.runner import SMALL as CONVERSATION
from tests.integration.cli.runner import fails, json_out, ok, write_jsonl


async def test_a_page_of_sessions_iterates_its_sessions(store):
    tenant = store.for_tenant("app", "user")
    created = [await tenant.create_session() for _ in range(3)]

    page = await tenant.list_sessions(limit=2)

    assert [s.id for s in page] == [s.id for s in page.items]
    assert len(page) == 2
    assert page[0] == page.items[0]
    assert {s.id for s in page} <= {s.id for s in created}
    assert page.next_cursor is not None  # the fields are still there


async def test_a_compaction_result_prints_a_short_summary(store):
    session_id = await session_with_loops(store, loops=3)

    result = await compact_session_loops(store, session_id, config=SMALL)

    printed = str(result)
    assert printed.startswith(f"compaction wrote {len(result.blocks)} blocks on 3 loops")
    assert "tokens:" in printed
    assert len(printed.splitlines()) <= 5
    assert len(printed) < 300
    assert len(repr(result)) < 200
    # The summaries themselves stay out of it: they are in `blocks`.
    section = result.blocks[0].keep_compacted
    assert section is not None
    summary = section.messages[0].message
    assert isinstance(summary, CompactionSummaryMessage)
    assert summary.summary not in printed


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_database_nobody_migrated_is_a_schema_error_naming_the_fix(backend, tmp_path):
    if backend == "sqlite":
        opened = SessionStore.from_url(f"sqlite+aiosqlite:///{tmp_path / 'new.db'}")
    else:  # an empty schema: the tables exist elsewhere in that database, not on this path
        settings = {"search_path": "sessionstore_nobody_migrated_this"}
        opened = SessionStore.from_url(postgres_url(), connect_args={"server_settings": settings})

    async with opened as store:
        with pytest.raises(SchemaError, match="sessionstore db upgrade") as caught:
            await store.for_tenant("app", "user").create_session()

    assert "migrate.upgrade" in str(caught.value)
    assert not isinstance(caught.value, StorageError)
    assert caught.value.__cause__ is not None  # the driver's error stays chained


@pytest.mark.parametrize(
    ("typo", "suggestion"), [("dmeo", "'demo'"), ("sesions", "'sessions'"), ("exprot", "'export'")]
)
def test_a_command_typo_gets_a_did_you_mean(typo, suggestion):
    result = fails(None, typo)

    assert f"Did you mean {suggestion}?" in result.stderr


def test_an_unknown_command_with_no_close_name_gets_no_suggestion():
    result = fails(None, "zzzzzz")

    assert "No such command 'zzzzzz'." in result.stderr
    assert "Did you mean" not in result.stderr


@pytest.mark.parametrize("form", ["separate", "equals"])
def test_the_url_may_follow_the_command(db_url, tmp_path, form):
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [CONVERSATION])))
    url = ["--url", db_url] if form == "separate" else [f"--url={db_url}"]

    result = ok(None, "sessions", "list", *url, "--json", env={"SESSIONSTORE_URL": "x://"})

    assert [s["id"] for s in json_out(result)["items"]] == ["small-1"]


def test_arguments_after_a_double_dash_are_left_alone(tmp_path):
    missing = f"sqlite+aiosqlite:///{tmp_path / 'missing.db'}"

    # After `--`, "--url" is an argument (a session id), not the group's option.
    result = fails(missing, "sessions", "show", "--", "--url")

    assert "no SQLite database" in result.stderr
