"""`sessionstore sessions purge --older-than AGE`: retention from the command line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from sessionstore import SessionStore
from tests.integration.cli.runner import SMALL, cli, fails, json_out, ok, with_store, write_jsonl


async def _backdate(store: SessionStore, session_ids: list[str], days: int) -> None:
    # The only way to make a session old without waiting: move its last update back.
    moment = datetime.now(UTC) - timedelta(days=days)
    async with store.engine.begin() as conn:
        for session_id in session_ids:
            await conn.execute(
                text("UPDATE sessionstore_sessions SET updated_at = :t WHERE id = :sid"),
                {"t": moment, "sid": session_id},
            )


def _ids(db_url: str) -> list[str]:
    return sorted(s.id for s in with_store(db_url, lambda s: s.list_sessions()).items)


@pytest.fixture
def imported(db_url, tmp_path):
    """Sessions old-1, old-2 (40 days old) and new (fresh), owned by cli/local."""
    lines = [{**SMALL, "id": sid} for sid in ("old-1", "old-2", "new")]
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", lines)))
    with_store(db_url, _backdate, ["old-1", "old-2"], 40)
    return db_url


def test_a_dry_run_counts_and_deletes_nothing(imported):
    args = ("sessions", "purge", "--older-than", "30d", "--dry-run")
    report = json_out(ok(imported, *args, "--json"))

    assert report["dry_run"] is True
    assert report["sessions"] == 2
    assert report["rows"]["sessions"] == 2
    assert report["rows"]["loops"] == 4  # two user requests each
    assert report["rows"]["messages"] == 2 * len(SMALL["messages"])
    assert _ids(imported) == ["new", "old-1", "old-2"]
    text_out = ok(imported, *args).stdout
    assert "Would purge 2 session(s)" in text_out
    assert "(older than 30d)" in text_out


def test_purge_asks_unless_yes_and_removes_only_old_sessions(imported):
    refused = fails(imported, "sessions", "purge", "--older-than", "30d", input="n\n")
    assert "Aborted" in refused.stderr
    assert "older than 30d" in refused.stderr
    assert _ids(imported) == ["new", "old-1", "old-2"]

    result = ok(imported, "sessions", "purge", "--older-than", "720h", input="y\n")
    assert "Purged 2 session(s)" in result.stdout
    assert _ids(imported) == ["new"]
    again = json_out(ok(imported, "sessions", "purge", "--older-than", "30d", "--yes", "--json"))
    assert (again["sessions"], again["dry_run"], again["batches"]) == (0, False, 0)


def test_purge_in_batches_and_for_one_tenant(db_url, tmp_path):
    mine = [{**SMALL, "id": f"mine-{i}"} for i in range(3)]
    theirs = [{**SMALL, "id": "theirs"}]
    ok(db_url, "import", str(write_jsonl(tmp_path / "a.jsonl", mine)))
    ok(db_url, "import", "--app-name", "other", str(write_jsonl(tmp_path / "b.jsonl", theirs)))
    with_store(db_url, _backdate, ["mine-0", "mine-1", "mine-2", "theirs"], 10)

    report = json_out(
        ok(
            db_url,
            *("sessions", "purge", "--older-than", "1w", "--batch-size", "2"),
            *("--app-name", "cli", "--user-id", "local", "--yes", "--json"),
        )
    )

    assert (report["sessions"], report["batches"]) == (3, 2)
    assert _ids(db_url) == ["theirs"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "30"], "is not a duration"),
        (["--older-than", "0d"], "is not a duration"),
        (["--older-than", "-3d"], "is not a duration"),
        (["--older-than", "3y"], "is not a duration"),
        (["--older-than", "99999999999d"], "too long"),
        (["--older-than", "1d", "--app-name", "cli"], "--app-name and --user-id together"),
        (["--older-than", "1d", "--batch-size", "0"], "--batch-size"),
        ([], "Missing option '--older-than'"),
    ],
)
def test_bad_purge_options_are_usage_errors(db_url, args, message):
    result = cli(db_url, "sessions", "purge", *args, "--yes")

    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_a_session_that_cannot_be_deleted_is_named_and_the_exit_code_is_1(imported):
    """Issue 17, item 1: the others are purged; the skipped one is named on stderr."""

    async def hold(store: SessionStore) -> None:
        async with store.engine.begin() as conn:
            if store.engine.dialect.name == "postgresql":
                await conn.execute(
                    text(
                        "CREATE FUNCTION test_cli_hold() RETURNS trigger LANGUAGE plpgsql AS $$ "
                        "BEGIN IF OLD.id = 'old-1' THEN RAISE EXCEPTION 'legal hold'; END IF; "
                        "RETURN OLD; END $$"
                    )
                )
                await conn.execute(
                    text(
                        "CREATE TRIGGER test_cli_hold BEFORE DELETE ON sessionstore_sessions "
                        "FOR EACH ROW EXECUTE FUNCTION test_cli_hold()"
                    )
                )
            else:
                await conn.execute(
                    text(
                        "CREATE TRIGGER test_cli_hold BEFORE DELETE ON sessionstore_sessions "
                        "WHEN OLD.id = 'old-1' BEGIN SELECT RAISE(ABORT, 'legal hold'); END"
                    )
                )

    async def release(store: SessionStore) -> None:
        async with store.engine.begin() as conn:
            if store.engine.dialect.name == "postgresql":
                await conn.execute(text("DROP TRIGGER test_cli_hold ON sessionstore_sessions"))
                await conn.execute(text("DROP FUNCTION test_cli_hold()"))
            else:
                await conn.execute(text("DROP TRIGGER test_cli_hold"))

    with_store(imported, hold)
    try:
        result = fails(imported, "sessions", "purge", "--older-than", "30d", "--yes")
        report = json_out(
            fails(imported, "sessions", "purge", "--older-than", "30d", "--yes", "--json")
        )
    finally:
        with_store(imported, release)
    assert result.exit_code == 1
    assert "Purged 1 session(s)" in result.stdout
    assert "1 session(s) could not be deleted" in result.stderr
    assert "old-1 (cli/local): " in result.stderr
    assert "legal hold" in result.stderr
    assert [f["session_id"] for f in report["failed"]] == ["old-1"]
    assert report["sessions"] == 0
    assert _ids(imported) == ["new", "old-1"]
