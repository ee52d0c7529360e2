"""`sessionstore db upgrade|current|check`, and the schema check every other command makes."""

from __future__ import annotations

import sqlite3

import pytest

from sessionstore import migrate
from sessionstore._sqlite_read import VERSION_TABLE
from tests.integration.cli.runner import SMALL, cli, fails, json_out, ok, store_url, write_jsonl


def test_db_check_fails_before_upgrade_and_passes_after(empty_db_url):
    head = migrate.head()

    assert ok(empty_db_url, "db", "current").stdout.strip() == "none"
    assert json_out(ok(empty_db_url, "db", "current", "--json")) == {
        "revision": None,
        "head": head,
        "is_up_to_date": False,
    }
    result = fails(empty_db_url, "db", "check")
    assert result.exit_code == 1
    assert "not initialised" in result.stderr
    assert "sessionstore db upgrade" in result.stderr
    assert result.stdout == ""
    result = fails(empty_db_url, "db", "check", "--json")
    assert json_out(result)["is_up_to_date"] is False

    result = ok(empty_db_url, "db", "upgrade")
    assert head in result.stdout
    assert json_out(ok(empty_db_url, "db", "upgrade", "--json")) == {
        "revision": head,
        "head": head,
    }

    assert ok(empty_db_url, "db", "current").stdout.strip() == head
    assert "up to date" in ok(empty_db_url, "db", "check").stdout
    assert json_out(ok(empty_db_url, "db", "check", "--json")) == {
        "revision": head,
        "head": head,
        "is_up_to_date": True,
    }


def test_commands_refuse_a_database_that_is_not_migrated(empty_db_url, tmp_path):
    small = write_jsonl(tmp_path / "small.jsonl", [SMALL])
    for args in (["sessions", "list"], ["sessions", "show", "x"], ["import", str(small)]):
        result = fails(empty_db_url, *args)
        assert "run `sessionstore db upgrade`" in result.stderr


def test_import_upgrade_migrates_first(empty_db_url, tmp_path):
    small = write_jsonl(tmp_path / "small.jsonl", [SMALL])

    result = ok(empty_db_url, "import", "--upgrade", str(small), "--json")

    assert json_out(result)["sessions"] == ["small-1"]
    assert ok(empty_db_url, "db", "current").stdout.strip() == migrate.head()


@pytest.mark.parametrize("state", ["head", "older", "unknown", "empty", "two rows"])
@pytest.mark.parametrize(
    "args", [("current",), ("current", "--json"), ("check",), ("check", "--json")]
)
def test_a_sqlite_files_revision_is_what_alembic_says(tmp_path, state, args):
    """`db current` and `db check` read a file at the head without SQLAlchemy; the same output."""
    path = tmp_path / "revision.db"
    url = f"sqlite+aiosqlite:///{path}"
    if state == "empty":
        path.touch()
    else:
        ok(url, "db", "upgrade")
    with sqlite3.connect(path) as db:
        if state == "older":
            db.execute(f"UPDATE {VERSION_TABLE} SET version_num = '0012_written_search_vector'")
        elif state == "unknown":
            db.execute(f"UPDATE {VERSION_TABLE} SET version_num = 'ffffffffffff'")
        elif state == "two rows":
            db.execute(f"INSERT INTO {VERSION_TABLE} VALUES ('0012_written_search_vector')")

    fast = cli(url, "db", *args)
    through_alembic = cli(store_url(path), "db", *args)

    assert (fast.exit_code, fast.stdout, fast.stderr) == (
        through_alembic.exit_code,
        through_alembic.stdout,
        through_alembic.stderr,
    )
    assert fast.output.strip()
    if state == "head":
        assert fast.exit_code == 0
    elif args[0] == "check" or state == "two rows":
        assert fast.exit_code == 1
    if state == "two rows":  # a clear error, where alembic's own was a traceback
        assert f"{VERSION_TABLE} holds 2 revisions" in fast.stderr


def test_a_version_table_of_two_rows_is_a_clear_error_for_every_command(tmp_path):
    path = tmp_path / "two.db"
    url = f"sqlite+aiosqlite:///{path}"
    ok(url, "db", "upgrade")
    with sqlite3.connect(path) as db:
        db.execute(f"INSERT INTO {VERSION_TABLE} VALUES ('0012_written_search_vector')")

    for args in (["sessions", "list"], ["db", "upgrade"], ["context", "x", "--budget", "100"]):
        result = fails(url, *args)
        assert "holds 2 revisions" in result.stderr, args
