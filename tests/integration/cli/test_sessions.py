"""`sessionstore import`, `export` and `sessions list|show|delete`, with real dataset lines."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from tests.integration.cli.runner import SMALL, fails, json_out, ok, with_store, write_jsonl

TAU = "tau_bench_gpt4o_airline.jsonl"
SWE = "mini_swe_agent_gemini3pro_swebench_verified.jsonl"
# A handful of conversations from both files: several user requests each (tau-bench),
# one request (sympy), and harness complaints sent as user messages (django).
PICKED = {
    TAU: [
        "tau-bench/gpt-4o/airline/task000/trial3",
        "tau-bench/gpt-4o/airline/task024/trial0",
    ],
    SWE: [
        "mini-swe-agent/gemini-3-pro-preview/sympy__sympy-19954",
        "mini-swe-agent/gemini-3-pro-preview/django__django-11206",
        "mini-swe-agent/gemini-3-pro-preview/django__django-7530",
    ],
}
PICKED_IDS = [conversation_id for ids in PICKED.values() for conversation_id in ids]


@cache
def _dataset_lines(path: Path) -> dict[str, str]:
    lines = {}
    with path.open(encoding="utf-8") as file:
        for line in file:
            lines[json.loads(line)["id"]] = line.rstrip("\n")
    return lines


@pytest.fixture
def picked(dataset_dir: Path) -> dict[str, dict[str, Any]]:
    """The picked dataset conversations, by id, as the JSONL lines hold them."""
    found = {}
    for name, ids in PICKED.items():
        lines = _dataset_lines(dataset_dir / name)
        for conversation_id in ids:
            found[conversation_id] = json.loads(lines[conversation_id])
    return found


@pytest.fixture
def picked_file(tmp_path: Path, picked: dict[str, dict[str, Any]]) -> Path:
    return write_jsonl(tmp_path / "picked.jsonl", list(picked.values()))


# ── import ─────────────────────────────────────────────────────────────────────


def test_import_makes_one_loop_per_user_request(db_url, picked, picked_file):
    result = ok(db_url, "import", str(picked_file), "--json")

    assert json_out(result) == {
        "imported": len(PICKED_IDS),
        "skipped": 0,
        "sessions": PICKED_IDS,
        "skipped_sessions": [],
    }
    for conversation_id, conversation in picked.items():
        session, loops, history = with_store(db_url, _load, conversation_id)
        roles = [m["role"] for m in conversation["messages"]]
        assert session.title == conversation_id
        assert (session.app_name, session.user_id) == ("cli", "local")
        assert session.metadata == {key: conversation[key] for key in ("source", "license", "meta")}
        assert len(loops) == roles.count("user")
        assert [loop.parent_loop_id for loop in loops] == [None] + [loop.id for loop in loops[:-1]]
        assert session.active_loop_id == loops[-1].id
        assert [loop.closed_at is None for loop in loops] == [False] * (len(loops) - 1) + [True]
        # The system prompt shares the first loop with the first request; every other
        # loop starts at a user message.
        by_loop: dict[int, list[str]] = {}
        for stored in history:
            by_loop.setdefault(stored.loop_id, []).append(stored.message.kind)
        assert list(by_loop) == [loop.id for loop in loops]
        assert by_loop[loops[0].id][:2] == ["system", "user"]
        for loop in loops[1:]:
            assert by_loop[loop.id][0] == "user"
            assert "user" not in by_loop[loop.id][1:]
        assert [loop.message_count for loop in loops] == [len(k) for k in by_loop.values()]
        assert sum(loop.message_count for loop in loops) == len(roles)


async def _load(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    return (
        await store.get_session(session_id),
        await store.list_loops(session_id),
        await store.get_history(session_id),
    )


def test_import_splits_a_small_conversation_into_requests(db_url, tmp_path):
    no_system = {"id": "small-2", "messages": SMALL["messages"][1:]}
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [SMALL, no_system])))

    for session_id in ("small-1", "small-2"):
        history = with_store(db_url, SessionStore.get_history, session_id)
        loops: dict[int, list[str]] = {}
        for stored in history:
            loops.setdefault(stored.loop_id, []).append(stored.message.kind)
        first = ["user", "assistant", "tool_result", "assistant"]
        if session_id == "small-1":
            first = ["system", *first]
        assert list(loops.values()) == [first, ["user", "assistant"]]


def test_import_then_export_gives_back_the_same_messages(db_url, picked, picked_file, tmp_path):
    ok(db_url, "import", str(picked_file))

    for conversation_id, conversation in picked.items():
        exported = json_out(ok(db_url, "export", conversation_id))
        assert exported["messages"] == conversation["messages"]
        assert exported["id"] == exported["title"] == conversation_id
        assert exported["metadata"]["meta"] == conversation["meta"]


def test_export_compact_writes_a_line_that_imports_back(db_url, picked, picked_file, tmp_path):
    conversation_id = PICKED_IDS[0]
    ok(db_url, "import", str(picked_file))
    out = tmp_path / "out.jsonl"

    result = ok(db_url, "export", conversation_id, "--compact", "-o", str(out))

    assert result.stdout == ""
    assert str(out) in result.stderr
    text = out.read_text(encoding="utf-8")
    assert text.count("\n") == 1
    assert text.endswith("\n")
    ok(db_url, "sessions", "delete", conversation_id, "--yes")
    assert json_out(ok(db_url, "import", str(out), "--json"))["sessions"] == [conversation_id]
    again = json_out(ok(db_url, "export", conversation_id))
    assert again == json.loads(text)
    assert again["messages"] == picked[conversation_id]["messages"]
    assert again["metadata"] == {
        k: picked[conversation_id][k] for k in ("source", "license", "meta")
    }


def test_reimport_skips_sessions_that_exist(db_url, picked_file):
    ok(db_url, "import", str(picked_file))

    result = ok(db_url, "import", str(picked_file), "--json")

    assert json_out(result) == {
        "imported": 0,
        "skipped": len(PICKED_IDS),
        "sessions": [],
        "skipped_sessions": PICKED_IDS,
    }
    text = ok(db_url, "import", str(picked_file)).stdout
    assert f"Imported 0 session(s); skipped {len(PICKED_IDS)}" in text
    page = with_store(db_url, lambda s: s.list_sessions())
    assert len(page.items) == len(PICKED_IDS)


def test_import_derives_an_id_for_lines_without_a_usable_one(db_url, tmp_path):
    long_id = "x" * 129
    lines = [{**SMALL, "id": long_id}, {"messages": SMALL["messages"][1:3]}]
    path = write_jsonl(tmp_path / "lines.jsonl", lines)

    first = json_out(ok(db_url, "import", str(path), "--json"))
    second = json_out(ok(db_url, "import", str(path), "--json"))

    assert first["imported"] == 2
    assert all(len(i) <= 128 for i in first["sessions"])
    assert second["skipped_sessions"] == first["sessions"]
    session = with_store(db_url, lambda s: s.get_session(first["sessions"][0]))
    assert session.title == long_id
    untitled = with_store(db_url, lambda s: s.get_session(first["sessions"][1]))
    assert untitled.title is None
    assert untitled.metadata == {}


def test_import_tenant_options(db_url, tmp_path):
    path = write_jsonl(tmp_path / "small.jsonl", [SMALL])

    ok(db_url, "import", str(path), "--app-name", "bench", "--user-id", "ci")

    session = with_store(db_url, lambda s: s.get_session("small-1"))
    assert (session.app_name, session.user_id) == ("bench", "ci")
    result = fails(db_url, "import", str(path), "--app-name", "")
    assert "app_name and user_id" in result.stderr


def test_a_bad_line_stops_the_import_and_names_the_line(db_url, tmp_path):
    good = {**SMALL, "id": "good"}
    after = {**SMALL, "id": "after"}
    path = write_jsonl(tmp_path / "bad.jsonl", [good, "", '{"id": "broken", "messages": [', after])

    result = fails(db_url, "import", str(path))

    assert result.exit_code == 1
    assert "line 3: invalid JSON" in result.stderr
    assert "1 session(s) imported from earlier lines stay imported" in result.stderr
    assert result.stdout == ""
    ids = [s.id for s in with_store(db_url, lambda s: s.list_sessions()).items]
    assert ids == ["good"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"id": "a"}', "the object has no 'messages' list"),
        ('{"id": 7, "messages": []}', "'id' must be a string"),
        ('{"id": "a", "messages": [{"content": "hi"}]}', "message 0: the message has no 'role'"),
        (
            '{"id": "a", "messages": [{"role": "robot"}]}',
            "message 0: role 'robot' is not supported",
        ),
        ('{"id": "a", "metadata": [], "messages": []}', "'metadata' must be an object"),
    ],
)
def test_bad_lines_are_explained(db_url, tmp_path, line, reason):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n", encoding="utf-8")

    result = fails(db_url, "import", str(path), "--json")

    assert f"line 1: {reason}" in result.stderr
    assert "no session was imported" in result.stderr
    assert result.stdout == ""
    assert with_store(db_url, lambda s: s.list_sessions()).items == []


def test_import_of_a_missing_file_is_a_usage_error(db_url, tmp_path):
    result = fails(db_url, "import", str(tmp_path / "missing.jsonl"))

    assert result.exit_code == 2
    assert "does not exist" in result.stderr


# ── sessions ───────────────────────────────────────────────────────────────────


def test_sessions_list_pages_and_filters(db_url, tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [{**SMALL, "id": f"s{i}"} for i in range(3)])
    ok(db_url, "import", str(path))
    ok(db_url, "import", str(write_jsonl(tmp_path / "o.jsonl", [SMALL])), "--app-name", "other")

    everything = json_out(ok(db_url, "sessions", "list", "--json"))
    assert {s["id"] for s in everything["items"]} == {"s0", "s1", "s2", "small-1"}
    assert everything["next_cursor"] is None

    first = json_out(ok(db_url, "sessions", "list", "--app-name", "cli", "--limit", "2", "--json"))
    assert len(first["items"]) == 2
    cursor = first["next_cursor"]
    assert cursor
    rest = json_out(
        ok(
            db_url,
            "sessions",
            "list",
            "--app-name",
            "cli",
            "--limit",
            "2",
            "--cursor",
            cursor,
            "--json",
        )
    )
    assert rest["next_cursor"] is None
    ids = [s["id"] for s in first["items"] + rest["items"]]
    assert sorted(ids) == ["s0", "s1", "s2"]

    mine = json_out(
        ok(db_url, "sessions", "list", "--app-name", "other", "--user-id", "local", "--json")
    )
    assert [s["id"] for s in mine["items"]] == ["small-1"]
    assert mine["items"][0]["app_name"] == "other"

    text = ok(db_url, "sessions", "list", "--app-name", "cli", "--limit", "2").stdout
    assert "cli/local" in text
    assert f"--cursor {cursor}" in text


def test_sessions_list_text_and_bad_options(db_url):
    assert "No sessions." in ok(db_url, "sessions", "list").stdout

    result = fails(db_url, "sessions", "list", "--cursor", "not-a-cursor")
    assert result.exit_code == 2
    assert "--cursor" in result.stderr
    result = fails(db_url, "sessions", "list", "--user-id", "local")
    assert "--app-name" in result.stderr
    assert fails(db_url, "sessions", "list", "--limit", "0").exit_code == 2


def test_sessions_show(db_url, tmp_path):
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [SMALL])))

    shown = json_out(ok(db_url, "sessions", "show", "small-1", "--json"))

    session = shown["session"]
    assert session["id"] == "small-1"
    assert session["title"] == "small-1"
    assert session["metadata"] == {"source": "hand-written"}
    loops = shown["loops"]
    assert [loop["message_count"] for loop in loops] == [5, 2]
    assert [loop["is_active"] for loop in loops] == [False, True]
    assert loops[1]["parent_loop_id"] == loops[0]["id"]
    assert loops[1]["id"] == session["active_loop_id"]
    assert all(loop["turn_count"] > 0 for loop in loops)
    assert loops[0]["closed_at"] is not None

    text = ok(db_url, "sessions", "show", "small-1", env={"COLUMNS": "200"}).stdout
    assert "small-1" in text
    assert "hand-written" in text
    assert "*" in text


def test_sessions_show_a_session_without_loops(db_url, tmp_path):
    ok(db_url, "import", str(write_jsonl(tmp_path / "e.jsonl", [{"id": "e", "messages": []}])))

    assert "No loops." in ok(db_url, "sessions", "show", "e").stdout
    assert json_out(ok(db_url, "sessions", "show", "e", "--json"))["loops"] == []
    assert json_out(ok(db_url, "export", "e"))["messages"] == []


def test_sessions_delete_asks_unless_yes(db_url, tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [{**SMALL, "id": "a"}, {**SMALL, "id": "b"}])
    ok(db_url, "import", str(path))

    refused = fails(db_url, "sessions", "delete", "a", input="n\n")
    assert "Aborted" in refused.stderr
    assert with_store(db_url, lambda s: s.get_session("a")).id == "a"

    ok(db_url, "sessions", "delete", "a", input="y\n")
    result = ok(db_url, "sessions", "delete", "b", "--yes")
    assert "Deleted session 'b'" in result.stdout
    assert with_store(db_url, lambda s: s.list_sessions()).items == []


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "show", "nope"],
        ["sessions", "show", "nope", "--json"],
        ["sessions", "delete", "nope", "--yes"],
        ["export", "nope"],
    ],
)
def test_an_unknown_session_is_a_clean_error(db_url, args):
    result = fails(db_url, *args)

    assert result.exit_code == 1
    assert "session 'nope' not found" in result.stderr
    assert result.stdout == ""


# ── export ─────────────────────────────────────────────────────────────────────


def test_export_loop_gives_the_chain_ending_at_that_loop(db_url, tmp_path):
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [SMALL])))
    loops = with_store(db_url, lambda s: s.list_loops("small-1"))

    first = json_out(ok(db_url, "export", "small-1", "--loop", str(loops[0].number)))
    whole = json_out(ok(db_url, "export", "small-1", "--loop", str(loops[1].number)))

    assert first["messages"] == SMALL["messages"][:5]
    assert whole["messages"] == SMALL["messages"]
    result = fails(db_url, "export", "small-1", "--loop", "999999", "-o", str(tmp_path / "x"))
    assert "loop 999999 not found" in result.stderr
    assert not (tmp_path / "x").exists()


def test_export_is_pretty_by_default(db_url, tmp_path):
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [SMALL])))

    text = ok(db_url, "export", "small-1").stdout

    assert text.startswith('{\n  "id": "small-1",')
    assert json.loads(text)["messages"] == SMALL["messages"]
