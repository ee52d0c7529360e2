"""Any valid Unicode text is stored verbatim on every backend, NUL included (issue 10, defect 3).

PostgreSQL's `text` and `jsonb` cannot hold U+0000; the store encodes it there (and the
escape character it uses) and decodes it on the way out, so the round trip is exact and
content hashes are the same as on SQLite.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import Text, bindparam, cast, select, text, type_coerce

from sessionstore import (
    AssistantMessage,
    CompactedSection,
    CompactionBlock,
    CustomMessage,
    Message,
    ReplacementMessage,
    SessionStore,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    UserMessage,
    build_context,
    make_engine,
)
from sessionstore.models import content_hash, message_payload
from sessionstore.store import _nul, _plain, _statements
from sessionstore.store._types import MessagePayload

ESC = _nul.ESCAPE
ODD = [
    "\x00",
    "a\x00b",
    "\x00\x00",
    ESC,
    f"{ESC}0",
    f"{ESC}1\x00{ESC}",
    "\\u0000",
    "\\\x00",
    '"\x00"',
    "🙂\x00é",
]


def _messages(odd: str) -> list[Message]:
    call = ToolCall(id="call_0", name="bash", arguments={f"k{odd}": [odd, {"deep": odd}]})
    return [
        UserMessage(content=f"show me {odd}"),
        AssistantMessage(content=[call]),
        ToolResultMessage(tool_call_id="call_0", tool_name="bash", content=f"PK\x03\x04{odd}"),
        CustomMessage(custom_type="note", data={odd: odd, "list": [odd, 1, None]}),
    ]


@pytest.mark.parametrize("odd", ODD, ids=repr)
async def test_messages_with_nul_round_trip_exactly(store: SessionStore, odd: str) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    messages = _messages(odd)
    stored = await store.append_messages(session.id, messages)
    read = await store.get_messages(session.id)
    assert [m.message for m in read] == messages
    assert [m.message for m in stored] == messages
    # The hash is of the canonical text of the message itself, identical on both backends.
    assert [m.content_hash for m in read] == [content_hash(message_payload(m)) for m in messages]
    by_id = await store.get_messages_by_id(session.id, [m.id for m in stored])
    assert [m.message for m in by_id] == messages
    built = await build_context(store, session.id, max_context_tokens=10_000)
    assert built.messages[-4:] == messages


async def test_titles_metadata_and_event_details_hold_nul(store: SessionStore) -> None:
    metadata: dict[str, Any] = {"a\x00": "b\x00", "nested": [{"x": f"\x00{ESC}"}]}
    session = await store.create_session(
        app_name="a", user_id="u", title=f"title\x00{ESC}1", metadata=metadata
    )
    again = await store.get_session(session.id)
    assert again.title == f"title\x00{ESC}1"
    assert again.metadata == metadata
    listed = (await store.list_sessions(app_name="a", user_id="u")).items
    assert [s.title for s in listed] == [f"title\x00{ESC}1"]
    await store.append_messages(session.id, [UserMessage(content="hi")])
    event = await store.record_compaction_event(
        session.id, event="started", tokens_before=1, details={"why\x00": "nul\x00"}
    )
    assert event.details == {"why\x00": "nul\x00"}
    (listed_event,) = await store.list_compaction_events(session.id)
    assert listed_event.details == {"why\x00": "nul\x00"}


async def test_a_block_with_nul_in_its_summary_round_trips(store: SessionStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    stored = await store.append_messages(session.id, _messages("\x00"))  # turn 1 is closed
    summary = UserMessage(content="[Summary] bash printed \x00 bytes")
    block = await store.write_block(
        session.id,
        stored[0].loop_id,
        CompactionBlock(
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=1, end_turn=1),
                messages=[ReplacementMessage(message=summary, covers=[stored[1].id, stored[2].id])],
            ),
            config={"note\x00": "x"},
        ),
    )
    read = await store.get_block(session.id, stored[0].loop_id)
    assert read == block
    assert read is not None
    assert read.keep_compacted is not None
    assert read.keep_compacted.messages[0].message == summary
    assert read.config == {"note\x00": "x"}


async def test_postgresql_stores_the_encoded_form_and_sqlite_the_text(
    store: SessionStore, db_url: str
) -> None:
    """The encoding is on PostgreSQL only: SQLite's rows hold the text as it is."""
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(session.id, [UserMessage(content="a\x00b")])
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            raw = (
                await conn.execute(text("SELECT CAST(payload AS TEXT) FROM sessionstore_messages"))
            ).scalar_one()
    finally:
        await engine.dispose()
    if store.engine.dialect.name == "postgresql":
        assert f"a{ESC}0b" in raw
    else:
        assert "a\\u0000b" in raw


def test_the_encoding_is_reversible() -> None:
    for odd in ODD:
        assert _nul.unescape(_nul.escape(odd)) == odd
        assert "\x00" not in _nul.escape(odd)
    assert _nul.escape("plain") == "plain"
    tree = {"k\x00": [ESC, {"x": "\x00"}, 1, None, True]}
    assert _nul.unescape_tree(_nul.escape_tree(tree)) == tree


async def test_ids_with_nul_work_on_every_backend(store: SessionStore) -> None:
    session = await store.create_session(
        session_id="s\x00id", app_name="app\x00", user_id=f"u{ESC}0"
    )
    assert session.id == "s\x00id"
    tenant = store.for_tenant("app\x00", f"u{ESC}0")
    assert [s.id for s in (await tenant.list_sessions()).items] == ["s\x00id"]
    assert (await store.for_tenant("app", f"u{ESC}0").list_sessions()).items == []
    call = ToolCall(id="call\x00", name="read\x00file")
    messages: list[Message] = [
        UserMessage(content="go", client_id="c\x00"),
        AssistantMessage(content=[call]),
        ToolResultMessage(tool_call_id="call\x00", tool_name="read\x00file", content="ok"),
    ]
    stored = await tenant.append_messages("s\x00id", messages)
    assert [m.turn_index for m in stored] == [0, 1, 1]
    # A retry with the same client id is recognised: no duplicate.
    again = await tenant.append_messages("s\x00id", [messages[0]])
    assert [m.id for m in again] == [stored[0].id]
    assert [m.message for m in await tenant.get_messages("s\x00id")] == messages
    assert (await store.verify()).is_ok
    await tenant.delete_session("s\x00id")
    assert (await store.list_sessions()).items == []


async def test_reads_straight_from_the_driver_decode_as_sqlalchemy_does(db_url: str) -> None:
    """`read_plain` rows (no result processing) give what SQLAlchemy's processed rows give.

    A store of its own, with no cursor listener (one would send PostgreSQL reads through
    SQLAlchemy, see `read_plain`).
    """
    tenant_app, tenant_user = f"app{ESC}1\x00", f"u\x00{ESC}"
    async with SessionStore.from_url(db_url) as store:
        tenant = store.for_tenant(tenant_app, tenant_user)
        session = await tenant.create_session(session_id=f"s\x00{ESC}0")
        written = []
        for n, odd in enumerate(ODD):
            messages = _messages(odd)
            messages[0] = UserMessage(content=f"go {odd}", client_id=f"c{n}{odd}")
            messages[3] = CustomMessage(custom_type="f", data={"f": [-0.0, 1e300, 2.5e-8, odd]})
            written += await tenant.append_messages(session.id, messages)

        def plain_rows(db: Any) -> Any:
            statement = _statements.select_loop_messages(True, False)
            params = {"sid": session.id, "app": tenant_app, "user": tenant_user, "n": None}
            return _plain.read_plain(db, statement, params)

        # The fast path is taken on both backends (SQLite's driver, asyncpg).
        assert len(await store._runner.run(plain_rows)) == len(written)
        dumps = [m.model_dump() for m in written]
        by_id = await tenant.get_messages_by_id(session.id, [m.id for m in written])
        assert [m.model_dump() for m in by_id] == dumps
        assert [m.model_dump() for m in await tenant.get_messages(session.id)] == dumps
        newest = await tenant.get_messages(session.id, last=5)
        assert [m.model_dump() for m in newest] == dumps[-5:]
        assert [m.model_dump() for m in await tenant.get_history(session.id)] == dumps
        chunks = [m async for chunk in tenant.iter_history(session.id, chunk_size=7) for m in chunk]
        assert [m.model_dump() for m in chunks] == dumps


async def test_a_message_payload_bound_by_its_column_type_reads_back_as_text(db_url: str) -> None:
    """The payload's own bind processor (the insert Citus runs) stores what the reads decode.

    Since 0014 the payload is `json` on PostgreSQL, kept as sent: an encoded NUL's escape
    character must be in the text as itself (the text reads look for it), which the
    column's serialiser sees to; this sends values through it and the server's `json`,
    and reads them back as the history reads do (`CAST(... AS TEXT)`, `NulSafeJSONText`).
    """
    values = [message_payload(message) for odd in ODD for message in _messages(odd)] + [
        {"f": [-0.0, 1e300, 2.5e-8], "e": f"{ESC}2-0.0", "u": "é🙂"}
    ]
    stored = type_coerce(bindparam("p", type_=MessagePayload), MessagePayload)
    read = type_coerce(cast(stored, Text), _nul.NulSafeJSONText())
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            texts = [
                (await conn.execute(select(read), {"p": value})).scalar_one() for value in values
            ]
    finally:
        await engine.dispose()
    assert [json.loads(found) for found in texts] == values
