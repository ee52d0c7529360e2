"""Floats in stored JSON read back exactly on every backend (issue 17, item 13).

PostgreSQL's `jsonb` keeps numbers as `numeric`: `1e300` read back as a 301-digit integer
and `-0.0` as `0.0`, so a message's content hash no longer matched and `db verify`
reported tampering. The store now writes such floats in a form `jsonb` keeps (`_nul.py`),
and a float stays a JSON number there, so `jsonb` queries still compare it by value.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from sessionstore import (
    AssistantMessage,
    CompactedSection,
    CompactionBlock,
    CustomMessage,
    Message,
    ReplacementMessage,
    SessionStore,
    ToolCall,
    TurnRange,
    UserMessage,
    make_engine,
)
from sessionstore.models import content_hash, message_payload
from sessionstore.store import _nul

AWKWARD = [1e300, -1e300, 1e16, 1.2345678901234567e20, 1.7976931348623157e308, -0.0, 5e-324]


def _same(a: Any, b: Any) -> bool:
    """Equal, with floats of the same type and sign (so -0.0 is not 0.0, 1e16 not 10**16)."""
    if isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


async def test_every_stored_json_column_keeps_its_floats(store: SessionStore) -> None:
    values: dict[str, Any] = {"all": AWKWARD, "one": -0.0, "nested": [{"x": 1e300}]}
    session = await store.create_session(app_name="a", user_id="u", metadata=values)
    assert _same((await store.get_session(session.id)).metadata, values)
    messages: list[Message] = [
        UserMessage(content="measure it"),
        AssistantMessage(
            content=[ToolCall(id="c", name="probe", arguments={"scale": 1e300, "zero": -0.0})]
        ),
    ]
    stored = await store.append_messages(
        session.id, [*messages, CustomMessage(custom_type="t", data=values)]
    )
    read = await store.get_messages(session.id)
    assert [m.message for m in read] == [m.message for m in stored]
    assert _same(read[-1].message.data, values)  # type: ignore[union-attr]  # a CustomMessage
    for message in read:
        assert message.content_hash == content_hash(message_payload(message.message))
    event = await store.record_compaction_event(
        session.id, event="started", tokens_before=1, details=values
    )
    (listed,) = await store.list_compaction_events(session.id)
    assert _same(listed.details, values)
    assert _same(event.details, values)
    summary = CustomMessage(custom_type="summary", data={"ratio": 1e300, "zero": -0.0})
    await store.write_block(
        session.id,
        stored[0].loop_id,
        CompactionBlock(
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=0, end_turn=0),
                messages=[ReplacementMessage(message=summary, covers=[stored[0].id])],
            ),
            config={"threshold": 1e300, "zero": -0.0},
        ),
    )
    block = await store.get_block(session.id, stored[0].loop_id)
    assert block is not None
    assert block.keep_compacted is not None
    assert _same(block.config, {"threshold": 1e300, "zero": -0.0})
    assert block.keep_compacted.messages[0].message == summary
    report = await store.verify()
    assert report.is_ok, report.problems


async def test_floats_stay_numbers_that_jsonb_compares_by_value(
    store: SessionStore, db_url: str
) -> None:
    """The encoding keeps a float a JSON number (PostgreSQL's `->>` and casts still work)."""
    if not db_url.startswith("postgresql"):
        pytest.skip("a jsonb query")
    await store.create_session(app_name="a", user_id="u", metadata={"big": 1e300, "n": 1e16})
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT jsonb_typeof(metadata->'big'), (metadata->>'big')::float8, "
                        "(metadata->>'n')::numeric = 1e16 FROM sessionstore_sessions"
                    )
                )
            ).one()
    finally:
        await engine.dispose()
    assert tuple(row) == ("number", 1e300, True)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=st.recursive(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.integers(-(2**70), 2**70),
            st.lists(
                st.sampled_from(["a", "\x00", _nul.ESCAPE, "2", "-0.0", "1e+5", '"', "\\"]),
                max_size=5,
            ).map("".join),
            st.none(),
            st.booleans(),
        ),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=3), children, max_size=4)
        ),
        max_leaves=12,
    )
)
async def test_any_json_value_round_trips_exactly(store: SessionStore, value: Any) -> None:
    """Floats of every magnitude, the escape character and look-alikes of the encodings."""
    session = await store.create_session(app_name="a", user_id="u", metadata={"v": value})
    (stored,) = await store.append_messages(
        session.id, [CustomMessage(custom_type="t", data=value)]
    )
    (read,) = await store.get_messages(session.id)
    assert _same((await store.get_session(session.id)).metadata["v"], value)
    assert _same(read.message.data, value)  # type: ignore[union-attr]  # a CustomMessage
    assert read.content_hash == stored.content_hash
    assert stored.content_hash == content_hash(message_payload(read.message))


async def test_search_snippets_show_nul_as_the_message_holds_it(store: SessionStore) -> None:
    """Issue 17, item 8: PostgreSQL's snippets showed its escape (`exit\\U0010ffff0code`)."""
    session = await store.create_session(app_name="a", user_id="u")
    await store.append_messages(
        session.id, [UserMessage(content="the exit\x00code was 1 and the ratio -0.0")]
    )
    (hit,) = await store.search("exit")
    # As on SQLite: the snippet shows a NUL as the space that separates words there.
    assert hit.snippet == "the **exit** code was 1 and the ratio -0.0"
