"""`import_jsonl` and `export_conversation` on SQLite and PostgreSQL: files in, sessions out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessionstore import (
    FormatError,
    ImportLineError,
    SessionNotFoundError,
    SessionStore,
    export_conversation,
    import_jsonl,
)

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "calc", "arguments": '{"expr": "2+2"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "4"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "And 3+3?"},
    {"role": "assistant", "content": "6."},
]


TENANT = {"app_name": "app", "user_id": "u"}


def line(session_id: str, **extra: Any) -> str:
    return json.dumps({"id": session_id, "source": "test", "messages": MESSAGES, **extra})


async def test_import_reports_new_and_existing_sessions_in_line_order(store: SessionStore) -> None:
    owner = {"app_name": "x", "user_id": "y"}
    first = await import_jsonl(store, [line("b"), "", "  \n", line("a")], **owner)
    again = await import_jsonl(store, [line("a").encode(), line("c").encode()], **owner)
    # Ids are per tenant: another tenant's "a" is its own session.
    other = await import_jsonl(store, [line("a")], **TENANT)

    assert (first.imported, first.skipped) == (["b", "a"], [])
    assert (again.imported, again.skipped) == (["c"], ["a"])
    assert (other.imported, other.skipped) == (["a"], [])
    session = await store.for_tenant("x", "y").get_session("a")
    assert (session.title, session.app_name, session.user_id) == ("a", "x", "y")
    assert session.metadata == {"source": "test"}
    assert len(await store.for_tenant("x", "y").list_loops("a")) == 2


async def test_a_bad_line_stops_the_import_and_keeps_the_lines_before(store: SessionStore) -> None:
    lines = [line("good"), line("skipped"), "", '{"id": "broken"', line("after")]
    await import_jsonl(store, [line("skipped")], **TENANT)

    with pytest.raises(ImportLineError) as caught:
        await import_jsonl(store, lines, **TENANT)

    error = caught.value
    assert isinstance(error, FormatError)
    assert str(error) == f"line 4: {error.reason}"
    assert error.line_number == 4
    assert error.reason.startswith("invalid JSON")
    assert isinstance(error.__cause__, FormatError)
    assert (error.report.imported, error.report.skipped) == (["good"], ["skipped"])
    page = await store.list_sessions()
    assert sorted(s.id for s in page.items) == ["good", "skipped"]


async def test_a_line_the_store_refuses_names_the_reason(store: SessionStore) -> None:
    with pytest.raises(ImportLineError) as refused:
        await import_jsonl(store, [line("a")], app_name="", user_id="u")
    assert refused.value.line_number == 1
    assert "app_name and user_id" in refused.value.reason
    assert isinstance(refused.value.__cause__, ValueError)

    bad_message = json.dumps({"id": "b", "messages": [{"role": "user", "content": 7}]})
    with pytest.raises(ImportLineError) as invalid:
        await import_jsonl(store, [line("ok"), bad_message], **TENANT)
    assert invalid.value.line_number == 2
    assert invalid.value.report.imported == ["ok"]
    assert (
        invalid.value.reason
        == "message 0: 'content' must be a string, a list of parts or null, not int"
    )
    assert isinstance(invalid.value.__cause__, FormatError)
    assert (await store.list_sessions()).items[0].id == "ok"


async def test_export_gives_back_the_imported_line(store: SessionStore) -> None:
    await import_jsonl(store, [line("a", title="A title", metadata={"k": 1})], **TENANT)

    exported = await export_conversation(store, "a")

    assert exported == {
        "id": "a",
        "title": "A title",
        "metadata": {"k": 1, "source": "test"},
        "messages": MESSAGES,
    }
    await store.delete_session("a")
    report = await import_jsonl(store, [json.dumps(exported)], **TENANT)
    assert report.imported == ["a"]
    assert await export_conversation(store, "a") == exported


async def test_export_of_a_loop_gives_the_chain_ending_there(store: SessionStore) -> None:
    await import_jsonl(store, [line("a")], **TENANT)
    first, second = await store.list_loops("a")

    assert (await export_conversation(store, "a", loop_id=first.id))["messages"] == MESSAGES[:5]
    assert (await export_conversation(store, "a", loop_id=second.id))["messages"] == MESSAGES
    with pytest.raises(SessionNotFoundError):
        await export_conversation(store, "nope")
