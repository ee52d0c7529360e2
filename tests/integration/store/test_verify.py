"""`SessionStore.verify` and `sessionstore db verify` find what got past the triggers.

Issue 10, defect 9: the data is corrupted through raw SQL with the triggers out of the
way (dropped and put back on SQLite, `session_replication_role = replica` on PostgreSQL),
then every kind of damage must be reported.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from sessionstore import (
    CompactedSection,
    CompactionBlock,
    IntegrityReport,
    ReplacementMessage,
    SessionStore,
    TurnRange,
    UserMessage,
    make_engine,
)
from tests.factories import conversation
from tests.integration.cli.runner import cli, json_out, ok


async def _build(store: SessionStore) -> tuple[str, list[Any], str]:
    damaged = await store.create_session(app_name="a", user_id="u")
    stored = await store.append_messages(damaged.id, conversation(4))
    await store.write_block(
        damaged.id,
        stored[0].loop_id,
        CompactionBlock(
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=1, end_turn=2),
                messages=[
                    ReplacementMessage(
                        message=UserMessage(content="[Summary]"),
                        covers=[m.id for m in stored if m.turn_index in (1, 2)],
                    )
                ],
            )
        ),
    )
    await store.start_loop(damaged.id)
    await store.append_messages(damaged.id, conversation(2))
    intact = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(intact.id, conversation(3))
    return damaged.id, stored, intact.id


async def _without_triggers(db_url: str, statements: list[str]) -> None:
    """Run raw statements the triggers would refuse, as a hostile or buggy tool would."""
    engine = make_engine(db_url)
    try:
        async with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # On Citus the setting must reach the workers' connections too.
                await conn.execute(text("SET LOCAL citus.propagate_set_commands = 'local'"))
                await conn.execute(text("SET LOCAL session_replication_role = replica"))
                for statement in statements:
                    await conn.execute(text(statement))
                return
            await _sqlite_without_triggers(conn, statements)
    finally:
        await engine.dispose()


async def _sqlite_without_triggers(conn: AsyncConnection, statements: list[str]) -> None:
    # DDL is transactional on SQLite: drop, write, and put the triggers back in one go.
    triggers = (
        await conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
    ).all()
    for name, _ in triggers:
        await conn.execute(text(f'DROP TRIGGER "{name}"'))
    for statement in statements:
        await conn.execute(text(statement))
    for _, sql in triggers:
        await conn.execute(text(sql))


async def test_an_intact_database_verifies(store: SessionStore) -> None:
    await _build(store)
    seen: list[tuple[int, int]] = []
    report = await store.verify(progress=lambda done, total: seen.append((done, total)))
    assert report.is_ok, report.problems
    assert (report.sessions, report.loops, report.blocks) == (2, 3, 1)
    assert report.messages == len(conversation(4)) + len(conversation(2)) + len(conversation(3))
    assert seen == [(1, 2), (2, 2)]


async def test_verify_reports_every_kind_of_damage(store: SessionStore, db_url: str) -> None:
    damaged, stored, intact = await _build(store)
    loop = stored[0].loop_id
    rewritten, dropped, shifted = stored[1], stored[3], stored[5]
    other_loop_message = (await store.get_messages(damaged))[-1]
    assert other_loop_message.loop_id != loop
    await _without_triggers(
        db_url,
        [
            # The content changes, the hash stays: a rewritten raw message.
            "UPDATE sessionstore_messages SET payload = "
            """'{"kind":"user","content":"forged"}' """
            f"WHERE id = {rewritten.id}",
            # A gap: one message deleted.
            f"DELETE FROM sessionstore_messages WHERE id = {dropped.id}",
            f"UPDATE sessionstore_messages SET turn_index = 99 WHERE id = {shifted.id}",
            f"UPDATE sessionstore_loops SET token_total = 1 WHERE id = {loop}",
            # The summary now claims to cover a message of another loop.
            f"UPDATE sessionstore_section_messages SET covers = '[{other_loop_message.id}]'",
        ],
    )
    report = await store.verify()
    assert not report.is_ok
    by_check = {(p.check, p.message_id) for p in report.problems}
    assert ("hash", rewritten.id) in by_check
    assert ("turns", shifted.id) in by_check
    assert {p.check for p in report.problems} >= {
        "hash",
        "positions",
        "turns",
        "counters",
        "provenance",
    }
    assert all(p.session_id == damaged for p in report.problems)
    assert any(p.check == "positions" and p.loop_id == loop for p in report.problems)
    (provenance,) = [p for p in report.problems if p.check == "provenance"]
    assert provenance.block_id is not None
    assert "not in loop" in provenance.detail
    # A tenant handle checks its tenant only.
    other = await store.for_tenant("b", "v").verify()
    assert other == IntegrityReport()
    assert intact


def test_db_verify_exits_non_zero_and_lists_the_problems(db_url: str) -> None:
    import asyncio

    async def build() -> tuple[str, list[Any]]:
        async with SessionStore.from_url(db_url) as store:
            damaged, stored, _ = await _build(store)
            return damaged, stored

    assert "OK: checked 0 sessions" in ok(db_url, "db", "verify").stdout
    damaged, stored = asyncio.run(build())
    assert json_out(ok(db_url, "db", "verify", "--json"))["is_ok"] is True
    asyncio.run(
        _without_triggers(db_url, [f"DELETE FROM sessionstore_messages WHERE id = {stored[2].id}"])
    )
    result = cli(db_url, "db", "verify")
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert f"session {damaged}, loop id {stored[0].loop_id}: [positions]" in result.stdout
    assert "problems in 2 sessions" in result.stderr
    result = cli(db_url, "db", "verify", "--json")
    assert result.exit_code == 1
    report = json_out(result)
    assert report["is_ok"] is False
    assert {p["check"] for p in report["problems"]} >= {"positions", "counters"}
