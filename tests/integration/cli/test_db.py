"""`sessionstore db upgrade|current|check`, and the schema check every other command makes."""

from __future__ import annotations

from sessionstore import migrate
from tests.integration.cli.runner import SMALL, fails, json_out, ok, write_jsonl


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
