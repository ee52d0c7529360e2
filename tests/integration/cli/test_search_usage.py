"""`sessionstore search` and the usage `sessions show` prints, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from sessionstore import AssistantMessage, SessionStore, Usage, UserMessage
from tests.integration.cli.runner import SMALL, fails, json_out, ok, with_store, write_jsonl


def test_search_prints_ranked_hits_and_json(db_url, tmp_path):
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [SMALL])))

    hits = json_out(ok(db_url, "search", "expr", "--json"))
    assert [(h["session_id"], h["kind"], h["is_summary"]) for h in hits] == [
        ("small-1", "assistant", False)
    ]
    assert "**expr**" in hits[0]["snippet"]
    assert hits[0]["score"] > 0

    text = ok(db_url, "search", "2+2", env={"COLUMNS": "200"}).stdout
    assert "small-1" in text
    assert "**2**" in text
    assert ok(db_url, "search", "nothing-like-this").stdout.strip() == "No matches."


@pytest.mark.parametrize("query", ['"', "AND", "*", "-", "NEAR("])
def test_search_takes_any_query_without_a_syntax_error(db_url, tmp_path, query):
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [SMALL])))
    assert isinstance(json_out(ok(db_url, "search", query, "--json")), list)


def test_search_options_filter_and_limit(db_url, tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [{**SMALL, "id": "a"}, {**SMALL, "id": "b"}])
    ok(db_url, "import", str(path))

    assert {h["session_id"] for h in json_out(ok(db_url, "search", "3", "--json"))} == {"a", "b"}
    only_b = json_out(ok(db_url, "search", "3", "--session", "b", "--json"))
    assert {h["session_id"] for h in only_b} == {"b"}
    assert len(json_out(ok(db_url, "search", "3", "--limit", "1", "--json"))) == 1
    other = json_out(ok(db_url, "search", "3", "--app-name", "elsewhere", "--json"))
    assert other == []
    assert "needs --app-name" in fails(db_url, "search", "3", "--user-id", "x").stderr
    assert "not found" in fails(db_url, "search", "3", "--session", "nope").stderr.lower()
    assert "empty" in fails(db_url, "search", "  ").stderr


def test_sessions_show_prints_usage_per_loop_and_in_total(db_url):
    async def seed(store: SessionStore) -> None:
        await store.create_session(session_id="u", app_name="app", user_id="ada")
        await store.append_messages(
            "u",
            [
                UserMessage(content="q"),
                AssistantMessage(
                    content="a",
                    usage=Usage(
                        input_tokens=1200,
                        output_tokens=30,
                        cache_read_tokens=1000,
                        cache_write_tokens=7,
                    ),
                ),
            ],
        )
        await store.record_usage("u", Usage(input_tokens=34, output_tokens=5))

    with_store(db_url, seed)

    shown = json_out(ok(db_url, "sessions", "show", "u", "--json"))
    usage = shown["usage"]
    assert usage["calls"] == 2
    assert usage["usage"] == {
        "input_tokens": 1234,
        "output_tokens": 35,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 7,
    }
    (loop,) = usage["loops"]
    assert loop["loop_id"] == shown["loops"][0]["id"]
    assert [(t["turn_index"], t["calls"]) for t in loop["turns"]] == [(1, 2)]

    text = ok(db_url, "sessions", "show", "u", env={"COLUMNS": "200"}).stdout
    assert "Usage (tokens)" in text
    assert "1,234" in text
    assert "Total" in text


def test_sessions_show_without_usage_has_no_usage_table(db_url, tmp_path):
    ok(db_url, "import", str(write_jsonl(tmp_path / "s.jsonl", [SMALL])))
    assert "Usage" not in ok(db_url, "sessions", "show", "small-1").stdout
    assert json_out(ok(db_url, "sessions", "show", "small-1", "--json"))["usage"]["calls"] == 0
